// Command pulumi-resource-command is a small, local stand-in for Pulumi's own
// "command" provider (github.com/pulumi/pulumi-command).
//
// Why it exists: strata's tests need a real Pulumi resource provider, with real
// create/update/delete and real diffs but no cloud. pulumi-command is the natural
// choice, but the Go module proxy available to our machines and CI refuses it
// (403 for every version), while github.com/pulumi/pulumi-go-provider is served.
// So this provider re-implements, with pulumi-go-provider's infer package, the
// subset of pulumi-command's schema that our Pulumi YAML projects use:
//
//	command:local:Command
//	  inputs:  create, update, delete, dir (strings), environment (map of strings),
//	           triggers (array of any), logging (stdout, stderr, stdoutAndStderr, none)
//	  outputs: the inputs, plus stdout and stderr
//
// The names, types and semantics follow pulumi-command's local.Command, so the
// same YAML runs unchanged against the real pulumi-command on a laptop.
//
// Build (from this folder):
//
//	go build -trimpath -ldflags "-X main.Version=0.1.0" -o DIR/pulumi-resource-command .
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

// Version is the plugin version reported to the Pulumi engine; override it
// with -ldflags "-X main.Version=...".
var Version = "0.1.0"

func main() {
	prov, err := Provider()
	if err == nil {
		err = prov.Run(context.Background(), "command", Version)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(1)
	}
}

// Provider builds the "command" provider, serving command:local:Command.
func Provider() (p.Provider, error) {
	prov, err := infer.NewProviderBuilder().
		WithDisplayName("Command (strata local subset)").
		WithDescription("Runs local shell commands as part of a Pulumi resource lifecycle; " +
			"a schema-compatible subset of pulumi-command.").
		WithResources(infer.Resource(&Command{})).
		Build()
	if err != nil {
		return p.Provider{}, err
	}
	// infer's default diff reports nested paths such as "triggers[0]" and only
	// forces replacement for top-level names, so a changed trigger element
	// would become an in-place update. Use a top-level diff of our own.
	prov.Diff = diff
	return prov, nil
}

// Command is the command:local:Command resource.
type Command struct{}

// CommandArgs are the inputs; names and types match pulumi-command.
type CommandArgs struct {
	Create      *string            `pulumi:"create,optional"`
	Update      *string            `pulumi:"update,optional"`
	Delete      *string            `pulumi:"delete,optional"`
	Dir         *string            `pulumi:"dir,optional"`
	Environment *map[string]string `pulumi:"environment,optional"`
	Triggers    *[]any             `pulumi:"triggers,optional" provider:"replaceOnChanges"`
	Logging     *Logging           `pulumi:"logging,optional"`
}

// Logging says which of the command's streams reach Pulumi's log (as pulumi-command's
// local.Logging). A command whose stdout is a secret (a kubeconfig) logs only stderr.
type Logging string

const (
	LogStdout          Logging = "stdout"
	LogStderr          Logging = "stderr"
	LogStdoutAndStderr Logging = "stdoutAndStderr"
	LogNone            Logging = "none"
)

// Values lists the enum for the schema (infer.Enum).
func (Logging) Values() []infer.EnumValue[Logging] {
	return []infer.EnumValue[Logging]{
		{Name: "Stdout", Value: LogStdout, Description: "Log stdout only."},
		{Name: "Stderr", Value: LogStderr, Description: "Log stderr only."},
		{Name: "StdoutAndStderr", Value: LogStdoutAndStderr, Description: "Log both (the default)."},
		{Name: "None", Value: LogNone, Description: "Log neither."},
	}
}

// CommandState is the checkpointed state: the inputs plus captured output.
type CommandState struct {
	CommandArgs
	Stdout string `pulumi:"stdout"`
	Stderr string `pulumi:"stderr"`
}

// Annotate sets the token and describes the resource in the schema.
func (c *Command) Annotate(a infer.Annotator) {
	a.SetToken("local", "Command")
	a.Describe(&c, "A local command run with /bin/sh -c on create, update and delete. "+
		"A non-zero exit fails the step.")
}

// Annotate describes the inputs in the schema.
func (c *CommandArgs) Annotate(a infer.Annotator) {
	a.Describe(&c.Create, "The command to run on create.")
	a.Describe(&c.Update, "The command to run on update; if empty, create runs again.")
	a.Describe(&c.Delete, "The command to run on delete.")
	a.Describe(&c.Dir, "The directory to run the command in; defaults to the provider's working directory.")
	a.Describe(&c.Environment, "Additional environment variables for the command's process.")
	a.Describe(&c.Triggers, "Trigger replacements on changes to this input.")
	a.Describe(&c.Logging, "Which streams of the command reach Pulumi's log, and its error on failure: "+
		"stdout, stderr, stdoutAndStderr (the default) or none.")
}

// Annotate describes the outputs in the schema.
func (c *CommandState) Annotate(a infer.Annotator) {
	a.Describe(&c.Stdout, "The standard output of the command's process.")
	a.Describe(&c.Stderr, "The standard error of the command's process.")
}

// Create runs `create`, if set. Nothing runs during preview.
func (*Command) Create(ctx context.Context, req infer.CreateRequest[CommandArgs]) (
	infer.CreateResponse[CommandState], error,
) {
	state := CommandState{CommandArgs: req.Inputs}
	id, err := resource.NewUniqueHex(req.Name, 8, 0)
	if err != nil || req.DryRun || req.Inputs.Create == nil {
		return infer.CreateResponse[CommandState]{ID: id, Output: state}, err
	}
	err = state.run(ctx, *req.Inputs.Create)
	return infer.CreateResponse[CommandState]{ID: id, Output: state}, err
}

// Update runs `update` if set, else `create`; outputs are refreshed.
func (*Command) Update(ctx context.Context, req infer.UpdateRequest[CommandArgs, CommandState]) (
	infer.UpdateResponse[CommandState], error,
) {
	state := CommandState{CommandArgs: req.Inputs, Stdout: req.State.Stdout, Stderr: req.State.Stderr}
	cmd := req.Inputs.Create
	if req.Inputs.Update != nil {
		cmd = req.Inputs.Update
	}
	if req.DryRun || cmd == nil {
		return infer.UpdateResponse[CommandState]{Output: state}, nil
	}
	err := state.run(ctx, *cmd)
	return infer.UpdateResponse[CommandState]{Output: state}, err
}

// Delete runs `delete`, if set; a non-zero exit fails the delete.
func (*Command) Delete(ctx context.Context, req infer.DeleteRequest[CommandState]) (infer.DeleteResponse, error) {
	if req.State.Delete == nil {
		return infer.DeleteResponse{}, nil
	}
	state := req.State
	return infer.DeleteResponse{}, state.run(ctx, *state.Delete)
}

// run executes command with /bin/sh -c in s.Dir with the provider's environment
// plus s.Environment and, as pulumi-command does by default, the previous
// output as PULUMI_COMMAND_STDOUT / PULUMI_COMMAND_STDERR. On success it stores
// stdout and stderr (one trailing newline trimmed) in s; on a non-zero exit it
// returns an error with the exit status and the command's output.
func (s *CommandState) run(ctx context.Context, command string) error {
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", command)
	if s.Dir != nil {
		cmd.Dir = *s.Dir
	}
	cmd.Env = os.Environ()
	if s.Environment != nil {
		for k, v := range *s.Environment {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
	}
	if s.Stdout != "" {
		cmd.Env = append(cmd.Env, "PULUMI_COMMAND_STDOUT="+s.Stdout)
	}
	if s.Stderr != "" {
		cmd.Env = append(cmd.Env, "PULUMI_COMMAND_STDERR="+s.Stderr)
	}
	// combined interleaves the logged streams for logs and error messages.
	var stdout, stderr bytes.Buffer
	combined := &syncBuffer{}
	logging := LogStdoutAndStderr
	if s.Logging != nil {
		logging = *s.Logging
	}
	cmd.Stdout, cmd.Stderr = io.Writer(&stdout), io.Writer(&stderr)
	if logging == LogStdout || logging == LogStdoutAndStderr {
		cmd.Stdout = io.MultiWriter(&stdout, combined)
	}
	if logging == LogStderr || logging == LogStdoutAndStderr {
		cmd.Stderr = io.MultiWriter(&stderr, combined)
	}
	err := cmd.Run()
	if out := strings.TrimSpace(combined.String()); out != "" {
		p.GetLogger(ctx).Info(out)
	}
	if err != nil {
		// Same shape as pulumi-command: "exit status 3: running "cmd":\n<output>".
		return fmt.Errorf("%w: running %q:\n%s", err, command, combined.String())
	}
	s.Stdout = strings.TrimSuffix(stdout.String(), "\n")
	s.Stderr = strings.TrimSuffix(stderr.String(), "\n")
	return nil
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of stdout and stderr.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(data []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(data)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// inputNames are the top-level input properties, used to rebuild old inputs
// from state when the engine does not send them.
var inputNames = []string{"create", "update", "delete", "dir", "environment", "triggers"}

// diff compares old and new inputs property by property (top level only):
// a change to triggers is a replacement, any other change an in-place update.
func diff(_ context.Context, req p.DiffRequest) (p.DiffResponse, error) {
	olds := req.OldInputs
	if olds.Len() == 0 {
		m := map[string]property.Value{}
		for _, k := range inputNames {
			if v, ok := req.State.GetOk(k); ok {
				m[k] = v
			}
		}
		olds = property.NewMap(m)
	}
	news := req.Inputs
	for _, k := range req.IgnoreChanges {
		if v, ok := olds.GetOk(k); ok {
			news = news.Set(k, v)
		}
	}
	toPM := func(m property.Map) resource.PropertyMap {
		for k := range m.All {
			if k == "version" || strings.HasPrefix(k, "__") { // engine-internal keys
				m = m.Delete(k)
			}
		}
		return resource.ToResourcePropertyValue(property.New(m)).ObjectValue()
	}
	od := toPM(olds).Diff(toPM(news))
	detailed := map[string]p.PropertyDiff{}
	for _, k := range od.ChangedKeys() {
		kind := p.Update
		switch {
		case od.Added(k):
			kind = p.Add
		case od.Deleted(k):
			kind = p.Delete
		}
		if k == "triggers" {
			kind = map[p.DiffKind]p.DiffKind{
				p.Add: p.AddReplace, p.Delete: p.DeleteReplace, p.Update: p.UpdateReplace,
			}[kind]
		}
		detailed[string(k)] = p.PropertyDiff{Kind: kind, InputDiff: true}
	}
	return p.DiffResponse{HasChanges: len(detailed) > 0, DetailedDiff: detailed}, nil
}
