package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blang/semver"
	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/integration"
	presource "github.com/pulumi/pulumi/sdk/v3/go/common/resource"
	"github.com/pulumi/pulumi/sdk/v3/go/property"
)

const urn = presource.URN("urn:pulumi:test::proj::command:local:Command::cmd")

type m = map[string]property.Value

func server(t *testing.T) integration.Server {
	t.Helper()
	prov, err := Provider()
	if err != nil {
		t.Fatal(err)
	}
	s, err := integration.NewServer(t.Context(), "command", semver.MustParse("0.1.0"), integration.WithProvider(prov))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// inputs builds an input map from string-valued properties, with dir set.
func inputs(dir string, kv ...string) property.Map {
	props := m{"dir": property.New(dir)}
	for i := 0; i+1 < len(kv); i += 2 {
		props[kv[i]] = property.New(kv[i+1])
	}
	return property.NewMap(props)
}

func create(t *testing.T, s integration.Server, in property.Map) p.CreateResponse {
	t.Helper()
	resp, err := s.Create(p.CreateRequest{Urn: urn, Properties: in})
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	return resp
}

func str(t *testing.T, props property.Map, key string) string {
	t.Helper()
	v, ok := props.GetOk(key)
	if !ok || !v.IsString() {
		t.Fatalf("%s missing or not a string in %v", key, props)
	}
	return v.AsString()
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool { _, err := os.Stat(path); return err == nil }

func TestSchema(t *testing.T) {
	resp, err := server(t).GetSchema(p.GetSchemaRequest{})
	if err != nil {
		t.Fatal(err)
	}
	type prop struct {
		ReplaceOnChanges bool `json:"replaceOnChanges"`
	}
	var schema struct {
		Name      string
		Resources map[string]struct {
			InputProperties map[string]prop
			Properties      map[string]prop
		}
	}
	if err := json.Unmarshal([]byte(resp.Schema), &schema); err != nil {
		t.Fatal(err)
	}
	r, ok := schema.Resources["command:local:Command"]
	if schema.Name != "command" || !ok {
		t.Fatalf("schema %q lacks command:local:Command: %s", schema.Name, resp.Schema)
	}
	for _, k := range []string{"create", "update", "delete", "dir", "environment", "triggers"} {
		if _, ok := r.InputProperties[k]; !ok {
			t.Errorf("input %s missing", k)
		}
	}
	for _, k := range []string{"stdout", "stderr", "create", "triggers"} {
		if _, ok := r.Properties[k]; !ok {
			t.Errorf("output %s missing", k)
		}
	}
	if !r.InputProperties["triggers"].ReplaceOnChanges {
		t.Error("triggers is not replaceOnChanges")
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	s := server(t)
	in := inputs(dir, "create", `printf "$GREETING" > created; echo out; echo err >&2`)
	in = in.Set("environment", property.New(m{"GREETING": property.New("hi")}))

	// A preview runs nothing.
	if _, err := s.Create(p.CreateRequest{Urn: urn, Properties: in, DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(dir, "created")) {
		t.Fatal("preview ran the create command")
	}

	resp := create(t, s, in)
	if got := readFile(t, filepath.Join(dir, "created")); got != "hi" {
		t.Errorf("created file = %q, want environment value %q", got, "hi")
	}
	if resp.ID == "" {
		t.Error("empty ID")
	}
	if got := str(t, resp.Properties, "stdout"); got != "out" {
		t.Errorf("stdout = %q", got)
	}
	if got := str(t, resp.Properties, "stderr"); got != "err" {
		t.Errorf("stderr = %q", got)
	}
	if got := str(t, resp.Properties, "create"); !strings.Contains(got, "created") {
		t.Errorf("create not echoed in outputs: %q", got)
	}
	if _, ok := resp.Properties.GetOk("update"); ok {
		t.Error("unset input update appears in outputs")
	}

	// No create command: nothing runs, outputs are empty.
	resp = create(t, s, inputs(dir))
	if str(t, resp.Properties, "stdout") != "" {
		t.Error("stdout without a create command")
	}
}

func TestCreateFails(t *testing.T) {
	_, err := server(t).Create(p.CreateRequest{Urn: urn,
		Properties: inputs(t.TempDir(), "create", "echo boom >&2; exit 3")})
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("want an error with exit status 3 and stderr, got %v", err)
	}
}

func TestDiff(t *testing.T) {
	dir := t.TempDir()
	s := server(t)
	old := inputs(dir, "create", "echo a", "delete", "true")
	old = old.Set("triggers", property.New([]property.Value{property.New("v1"), property.New(1.0)}))
	state := create(t, s, old).Properties

	diff := func(news property.Map) map[string]p.DiffKind {
		t.Helper()
		resp, err := s.Diff(p.DiffRequest{ID: "id", Urn: urn, State: state, OldInputs: old, Inputs: news})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]p.DiffKind{}
		for k, v := range resp.DetailedDiff {
			got[k] = v.Kind
		}
		if resp.HasChanges != (len(got) > 0) {
			t.Errorf("HasChanges = %v with detailed diff %v", resp.HasChanges, got)
		}
		return got
	}
	check := func(name string, got, want map[string]p.DiffKind) {
		t.Helper()
		if len(got) != len(want) {
			t.Errorf("%s: diff = %v, want %v", name, got, want)
			return
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: diff = %v, want %v", name, got, want)
			}
		}
	}

	check("unchanged", diff(old), map[string]p.DiffKind{})
	check("create string", diff(old.Set("create", property.New("echo b"))),
		map[string]p.DiffKind{"create": p.Update})
	check("update added, delete removed", diff(old.Set("update", property.New("echo u")).Delete("delete")),
		map[string]p.DiffKind{"update": p.Add, "delete": p.Delete})
	check("environment", diff(old.Set("environment", property.New(m{"A": property.New("1")}))),
		map[string]p.DiffKind{"environment": p.Add})
	check("trigger element", diff(old.Set("triggers",
		property.New([]property.Value{property.New("v2"), property.New(1.0)}))),
		map[string]p.DiffKind{"triggers": p.UpdateReplace})
	check("unknown trigger", diff(old.Set("triggers", property.New(property.Computed))),
		map[string]p.DiffKind{"triggers": p.UpdateReplace})
	resp, err := s.Diff(p.DiffRequest{ID: "id", Urn: urn, State: state, OldInputs: old,
		Inputs: old.Set("create", property.New("echo b")), IgnoreChanges: []string{"create"}})
	if err != nil || resp.HasChanges {
		t.Errorf("ignoreChanges: diff = %+v, %v; want no changes", resp, err)
	}

	// Without old inputs from the engine, they are rebuilt from state.
	resp, err = s.Diff(p.DiffRequest{ID: "id", Urn: urn, State: state,
		Inputs: old.Set("dir", property.New(t.TempDir()))})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.DetailedDiff) != 1 || resp.DetailedDiff["dir"].Kind != p.Update {
		t.Errorf("diff from state = %v, want dir: update", resp.DetailedDiff)
	}
}

func TestUpdate(t *testing.T) {
	dir := t.TempDir()
	s := server(t)
	log := filepath.Join(dir, "log")
	old := inputs(dir, "create", "echo create >> log; echo v1")
	state := create(t, s, old).Properties

	update := func(news property.Map, dryRun bool) property.Map {
		t.Helper()
		resp, err := s.Update(p.UpdateRequest{ID: "id", Urn: urn, State: state, OldInputs: old,
			Inputs: news, DryRun: dryRun})
		if err != nil {
			t.Fatalf("update: %v", err)
		}
		if !dryRun {
			old, state = news, resp.Properties
		}
		return resp.Properties
	}

	// No update command: create runs again, and sees the previous stdout.
	out := update(inputs(dir, "create", `echo create >> log; echo "v2 after $PULUMI_COMMAND_STDOUT"`), false)
	if got := str(t, out, "stdout"); got != "v2 after v1" {
		t.Errorf("stdout after create fallback = %q", got)
	}

	// A preview runs nothing.
	news := inputs(dir, "create", "echo create >> log", "update", "echo update >> log; echo v3")
	update(news, true)
	if got := readFile(t, log); got != "create\ncreate\n" {
		t.Errorf("log after preview = %q", got)
	}

	// With an update command, update runs instead of create.
	out = update(news, false)
	if got := str(t, out, "stdout"); got != "v3" {
		t.Errorf("stdout after update = %q", got)
	}
	if got := readFile(t, log); got != "create\ncreate\nupdate\n" {
		t.Errorf("log = %q, want create, create (fallback), update", got)
	}

	// A failing update fails the step.
	_, err := s.Update(p.UpdateRequest{ID: "id", Urn: urn, State: state, OldInputs: old,
		Inputs: inputs(dir, "update", "echo nope >&2; exit 4")})
	if err == nil || !strings.Contains(err.Error(), "exit status 4") || !strings.Contains(err.Error(), "nope") {
		t.Errorf("want exit status 4 and stderr, got %v", err)
	}
}

// TestReplaceOnTriggers plays the engine's create-before-delete replacement.
func TestReplaceOnTriggers(t *testing.T) {
	dir := t.TempDir()
	s := server(t)
	withTrigger := func(v string) property.Map {
		in := inputs(dir, "create", "touch $NAME", "delete", "rm $NAME")
		in = in.Set("environment", property.New(m{"NAME": property.New(v)}))
		return in.Set("triggers", property.New([]property.Value{property.New(v)}))
	}
	old := withTrigger("one")
	first := create(t, s, old)

	news := withTrigger("two")
	d, err := s.Diff(p.DiffRequest{ID: first.ID, Urn: urn, State: first.Properties, OldInputs: old, Inputs: news})
	if err != nil {
		t.Fatal(err)
	}
	if d.DetailedDiff["triggers"].Kind != p.UpdateReplace || d.DetailedDiff["environment"].Kind != p.Update {
		t.Fatalf("diff = %v, want triggers: update&replace, environment: update", d.DetailedDiff)
	}
	second := create(t, s, news)
	if err := s.Delete(p.DeleteRequest{ID: first.ID, Urn: urn, Properties: first.Properties, OldInputs: old}); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(dir, "one")) || !exists(filepath.Join(dir, "two")) {
		t.Error("after replacement want file two only")
	}
	if second.ID == first.ID {
		t.Error("replacement kept the ID")
	}
}

func TestDelete(t *testing.T) {
	dir := t.TempDir()
	s := server(t)
	del := func(in property.Map) error {
		t.Helper()
		c := create(t, s, in)
		return s.Delete(p.DeleteRequest{ID: c.ID, Urn: urn, Properties: c.Properties, OldInputs: in})
	}

	if err := del(inputs(dir, "create", "touch f", "delete", "rm f")); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(dir, "f")) {
		t.Error("delete did not remove the file")
	}
	if err := del(inputs(dir, "create", "touch g")); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(dir, "g")) {
		t.Error("no delete command, yet the file is gone")
	}
	err := del(inputs(dir, "delete", "echo cannot delete >&2; exit 7"))
	if err == nil || !strings.Contains(err.Error(), "exit status 7") || !strings.Contains(err.Error(), "cannot delete") {
		t.Errorf("want a failed delete with exit status 7 and stderr, got %v", err)
	}
}

func TestReadKeepsState(t *testing.T) {
	dir := t.TempDir()
	s := server(t)
	in := inputs(dir, "create", "echo x", "delete", "true")
	c := create(t, s, in)
	resp, err := s.Read(p.ReadRequest{ID: c.ID, Urn: urn, Properties: c.Properties, Inputs: in})
	if err != nil {
		t.Fatal(err)
	}
	if resp.ID != c.ID || !resp.Properties.Equals(c.Properties) {
		t.Errorf("read = %v %v, want %v %v", resp.ID, resp.Properties, c.ID, c.Properties)
	}
}

// logging: a stream not logged is not in the error either (a secret stdout stays out of
// Pulumi's output), and is still the output.
func TestLoggingKeepsUnloggedStreamsOutOfErrors(t *testing.T) {
	dir := t.TempDir()
	s := server(t)
	for _, c := range []struct {
		logging     string
		want, never []string
	}{
		{"stderr", []string{"progress"}, []string{"s3cr3t"}},
		{"stdout", []string{"s3cr3t"}, []string{"progress"}},
		{"none", nil, []string{"s3cr3t", "progress"}},
		{"stdoutAndStderr", []string{"s3cr3t", "progress"}, nil},
	} {
		in := inputs(dir, "create", "echo s3cr3t; echo progress >&2; exit 3")
		in = in.Set("logging", property.New(c.logging))
		_, err := s.Create(p.CreateRequest{Urn: urn, Properties: in})
		if err == nil {
			t.Fatalf("%s: no error", c.logging)
		}
		msg := strings.ReplaceAll(err.Error(), "echo s3cr3t; echo progress", "")
		for _, w := range c.want {
			if !strings.Contains(msg, w) {
				t.Errorf("%s: %q not in the error %q", c.logging, w, msg)
			}
		}
		for _, n := range c.never {
			if strings.Contains(msg, n) {
				t.Errorf("%s: %q in the error %q", c.logging, n, msg)
			}
		}
	}
	in := inputs(dir, "create", "echo s3cr3t; echo progress >&2")
	in = in.Set("logging", property.New("none"))
	if got := str(t, create(t, s, in).Properties, "stdout"); got != "s3cr3t" {
		t.Errorf("stdout = %q", got)
	}
}
