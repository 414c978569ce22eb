// Command pulumi-resource-kubernetes is Pulumi's own Kubernetes provider
// (github.com/pulumi/pulumi-kubernetes/provider/v4), built from its Go module.
//
// Why this main exists: upstream's cmd/pulumi-resource-kubernetes embeds
// schema-embed.json and terraform-mapping-embed.json, which its Makefile generates
// and the module does not carry. This main embeds the module's own schema.json and
// terraform-mapping.json instead, sets the schema's version as upstream's generator
// does, and calls the provider's own Serve: all behaviour is upstream's.
//
// scripts/install-pulumi.sh copies this folder and the two JSON files (from the module
// cache, never committed) into a scratch folder and builds there, stamping
// github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version.Version with -ldflags -X.
package main

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"

	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/provider"
	"github.com/pulumi/pulumi-kubernetes/provider/v4/pkg/version"
)

//go:embed schema.json
var schema []byte

//go:embed terraform-mapping.json
var terraformMapping []byte

func main() {
	versioned, err := withVersion(schema, version.Version)
	if err != nil {
		fmt.Fprintf(os.Stderr, "pulumi-resource-kubernetes: the embedded schema.json: %v\n", err)
		os.Exit(1)
	}
	provider.Serve("kubernetes", version.Version, versioned, terraformMapping)
}

// withVersion returns the schema with its top-level "version" set, every other key kept
// as it is (upstream's generate.go does the same through schema.PackageSpec).
func withVersion(schema []byte, v string) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(schema, &top); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	top["version"] = raw
	return json.Marshal(top)
}
