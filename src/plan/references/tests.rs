//! Unit tests of the stack reference scanners and their resolution against a plan.

use super::*;

/// The references of one code file, read alone, of project `app`.
fn in_code(text: &str, file: &Path) -> Vec<Reference> {
    repo::in_text(text, file, "app")
}

fn in_yaml(text: &str, file: &Path) -> Vec<Reference> {
    yaml::in_yaml(text, file, "app")
}

fn lit(s: &str) -> Part {
    Part::Literal(s.into())
}

/// The references of `text` as (org, project, stack, line), for short asserts.
fn parts(text: &str, file: &str) -> Vec<(Option<Part>, Option<Part>, Part, usize)> {
    in_code(text, Path::new(file))
        .into_iter()
        .map(|r| (r.org, r.project, r.stack, r.line))
        .collect()
}

fn known(
    org: Part,
    project: &str,
    stack: Part,
    line: usize,
) -> (Option<Part>, Option<Part>, Part, usize) {
    (Some(org), Some(lit(project)), stack, line)
}

/// What the scanner cannot read: every part unknown, never absent.
fn unknown(line: usize) -> (Option<Part>, Option<Part>, Part, usize) {
    (
        Some(Part::Unknown),
        Some(Part::Unknown),
        Part::Unknown,
        line,
    )
}

#[test]
fn pulumi_yaml() {
    let text = "name: app\nruntime: yaml\nresources:\n  cluster:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${pulumi.organization}/kubeconfig/${pulumi.stack}\n  other:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: acme/vpc/prod\n  bucket:\n    type: aws:s3:Bucket\n";
    let refs = in_yaml(text, Path::new("Pulumi.yaml"));
    assert_eq!(refs.len(), 2, "{refs:#?}");
    assert_eq!(refs[0].org, Some(Part::Org));
    assert_eq!(refs[0].project, Some(lit("kubeconfig")));
    assert_eq!(refs[0].stack, Part::Stack);
    assert_eq!(refs[0].line, 4);
    assert_eq!(refs[0].name, "${org}/kubeconfig/${stack}");
    assert_eq!(refs[1].org, Some(lit("acme")));
    assert_eq!(refs[1].stack, lit("prod"));
}

#[test]
fn pulumi_yaml_outputs_read_of_each_reference_with_their_lines() {
    let text = "name: app\nruntime: yaml\nresources:\n  net:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: acme/net/dev\n  network:\n    type: pulumi:pulumi:StackReference\n  c:\n    type: x:y:Z\n    properties:\n      cidr: ${net.outputs[\"cidr\"]} ${net.outputs['gw']}\n      id: ${ network.outputs.vpc_id }\noutputs:\n  other: ${netx.outputs[\"no\"]}\n";
    let refs = in_yaml(text, Path::new("Pulumi.yaml"));
    assert_eq!(refs.len(), 2, "{refs:#?}");
    assert_eq!(
        refs[0].outputs,
        [("cidr".to_string(), 13), ("gw".to_string(), 13)]
    );
    assert_eq!(refs[1].outputs, [("vpc_id".to_string(), 14)]);
}

#[test]
fn pulumi_yaml_name_that_is_no_string_is_unknown() {
    let text = "name: app\nruntime: yaml\nresources:\n  net:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name:\n        fn::invoke:\n          function: x\n  dev:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${stackName}\n";
    let refs = in_yaml(text, Path::new("Pulumi.yaml"));
    assert_eq!(refs.len(), 2, "{refs:#?}");
    assert!(refs[0].unreadable(), "not the resource's name: {refs:#?}");
    assert_eq!(refs[0].line, 4);
    // `stackName` is no resource nor variable: a config key of the project.
    assert_eq!(refs[1].project, Some(Part::Config("app:stackName".into())));
}

#[test]
fn pulumi_yaml_config_keys_are_names_no_resource_nor_variable_has() {
    let text = "name: app\nruntime: yaml\nconfig:\n  networkingStack:\n    type: string\nvariables:\n  env: dev\nresources:\n  bucket:\n    type: aws:s3:Bucket\n  net:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${networkingStack}\n  ns:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: acme/${infra:dbProject}/${env}\n  out:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: acme/${bucket.id}/dev\n";
    let refs = in_yaml(text, Path::new("Pulumi.yaml"));
    assert_eq!(refs.len(), 3, "{refs:#?}");
    assert_eq!(
        refs[0].project,
        Some(Part::Config("app:networkingStack".into()))
    );
    assert_eq!(
        refs[1].project,
        Some(Part::Config("infra:dbProject".into()))
    );
    assert_eq!(refs[1].stack, Part::Unknown, "a variable");
    assert_eq!(refs[2].project, Some(Part::Unknown), "a resource's output");
}

#[test]
fn python() {
    let text = r#"import pulumi
from pulumi import StackReference
org = pulumi.get_organization()
# StackReference("commented/out/dev")
vpc = StackReference(f"{pulumi.get_organization()}/vpc/{pulumi.get_stack()}")
eks = pulumi.StackReference("organization/eks/" + pulumi.get_stack())
kw = StackReference(name=f"{org}/ecr/{get_stack()}")
env = StackReference(f"{os.environ['STRATA_ORG']}/logs/{os.getenv('STRATA_STACK')}")
"#;
    assert_eq!(
        parts(text, "__main__.py"),
        vec![
            known(Part::Org, "vpc", Part::Stack, 5),
            known(lit("organization"), "eks", Part::Stack, 6),
            // A variable named org.
            known(Part::Org, "ecr", Part::Stack, 7),
            known(Part::Org, "logs", Part::Stack, 8),
        ]
    );
}

#[test]
fn typescript_and_javascript() {
    let text = "import * as pulumi from \"@pulumi/pulumi\";\nconst org = pulumi.getOrganization();\nconst vpc = new pulumi.StackReference(`${org}/vpc/${pulumi.getStack()}`);\nconst k = new StackReference(\"acme/kubeconfig/\" + pulumi.getStack(), {});\nconst e = new pulumi.StackReference(`${process.env.STRATA_ORG}/ecr/${process.env.STRATA_STACK}`);\n// new StackReference(\"x/y/z\")\n";
    assert_eq!(
        parts(text, "index.ts"),
        vec![
            known(Part::Org, "vpc", Part::Stack, 3),
            known(lit("acme"), "kubeconfig", Part::Stack, 4),
            known(Part::Org, "ecr", Part::Stack, 5),
        ]
    );
}

#[test]
fn go() {
    let text = "package main\n\nfunc main() {\n\tpulumi.Run(func(ctx *pulumi.Context) error {\n\t\tvpc, err := pulumi.NewStackReference(ctx, fmt.Sprintf(\"%s/vpc/%s\", ctx.Organization(), ctx.Stack()), nil)\n\t\teks, err := pulumi.NewStackReference(ctx, \"organization/eks/\"+ctx.Stack(), nil)\n\t\treturn nil\n\t})\n}\n";
    assert_eq!(
        parts(text, "main.go"),
        vec![
            known(Part::Org, "vpc", Part::Stack, 5),
            known(lit("organization"), "eks", Part::Stack, 6),
        ]
    );
}

#[test]
fn unknown_parts_stay_unknown_and_short_names_have_fewer_parts() {
    let refs = in_code(
        "a = StackReference(config.require(\"ref\"))\nb = StackReference(\"vpc/dev\")\nc = StackReference(\"dev\")\nd = StackReference(f\"{x}-net/{get_stack()}\")\n",
        Path::new("x.py"),
    );
    assert_eq!(refs.len(), 4, "{refs:#?}");
    assert_eq!(
        refs[0].project,
        Some(Part::Config("app:ref".into())),
        "a name read from config is that config value, in every part"
    );
    assert_eq!(refs[1].project, Some(lit("vpc")));
    assert_eq!(refs[1].org, None);
    assert_eq!(refs[2].project, None);
    assert_eq!(refs[2].stack, lit("dev"));
    assert_eq!(
        refs[3].project,
        Some(Part::Pattern("*-net".into())),
        "mixed text and one value"
    );
    let refs = in_code("a = StackReference(f\"{x}-{y}/dev\")\n", Path::new("x.py"));
    assert_eq!(refs[0].project, Some(Part::Unknown), "two values");
}

#[test]
fn python_keyword_and_second_argument_forms() {
    let text = r#"import pulumi
net = StackReference("net", stack_name=f"{pulumi.get_organization()}/net/{pulumi.get_stack()}")
dns = pulumi.StackReference(name="acme/dns/prod")
logs = StackReference(name="res", stack_name="acme/logs/" + get_stack())
pos = StackReference("res", "acme/pos/dev")
var = StackReference("net", stack_name=net_stack)
bare = StackReference(ref_name)
method = StackReference("acme/a/dev".upper())
opts = StackReference("acme/opt/dev", opts=pulumi.ResourceOptions(protect=True))
multi = StackReference(
    "net",
    stack_name="acme/multi/dev",  # a comma, a paren: ), in a comment
)
kw = StackReference("net", **args)
"#;
    assert_eq!(
        parts(text, "__main__.py"),
        vec![
            known(Part::Org, "net", Part::Stack, 2),
            known(lit("acme"), "dns", lit("prod"), 3),
            known(lit("acme"), "logs", Part::Stack, 4),
            known(lit("acme"), "pos", lit("dev"), 5),
            unknown(6),
            unknown(7),
            unknown(8),
            known(lit("acme"), "opt", lit("dev"), 9),
            known(lit("acme"), "multi", lit("dev"), 10),
            unknown(14),
        ]
    );
}

#[test]
fn typescript_args_forms() {
    let text = r#"import * as pulumi from "@pulumi/pulumi";
const a = new pulumi.StackReference("x", { name: `${pulumi.getOrganization()}/net/${pulumi.getStack()}` });
const b = new StackReference("x", {name});
const c = new StackReference("acme/c/dev", {});
const d = new StackReference("x", { name: stackName });
const e = new StackReference("x", args);
const f = new StackReference(refName);
const g = new StackReference("x", { ...base });
const h = new StackReference("acme/h/dev", undefined, { protect: true });
const i = new StackReference("x", {
    name: "acme/i/" + pulumi.getStack(),
});
"#;
    assert_eq!(
        parts(text, "index.ts"),
        vec![
            known(Part::Org, "net", Part::Stack, 2),
            unknown(3),
            known(lit("acme"), "c", lit("dev"), 4),
            unknown(5),
            unknown(6),
            unknown(7),
            unknown(8),
            known(lit("acme"), "h", lit("dev"), 9),
            known(lit("acme"), "i", Part::Stack, 10),
        ]
    );
}

#[test]
fn go_args_forms() {
    let text = "package main\n\
a, err := pulumi.NewStackReference(ctx, \"net\", &pulumi.StackReferenceArgs{Name: pulumi.String(fmt.Sprintf(\"%s/net/%s\", ctx.Organization(), ctx.Stack()))})\n\
b, err := pulumi.NewStackReference(ctx, \"dns\", &pulumi.StackReferenceArgs{\n\
\tName: pulumi.String(\"acme/dns/prod\"),\n\
})\n\
c, err := pulumi.NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: pulumi.String(stackName)})\n\
d, err := pulumi.NewStackReference(ctx, stackName, nil)\n\
e, err := pulumi.NewStackReference(ctx, \"x\", args)\n\
f, err := pulumi.NewStackReference(ctx, \"acme/f/dev\", &pulumi.StackReferenceArgs{})\n\
g, err := pulumi.NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: nameInput})\n\
h, err := NewStackReference(ctx, \"x\", &StackReferenceArgs{Name: pulumi.String(\"acme/h/\" + ctx.Stack())})\n";
    assert_eq!(
        parts(text, "main.go"),
        vec![
            known(Part::Org, "net", Part::Stack, 2),
            known(lit("acme"), "dns", lit("prod"), 3),
            unknown(6),
            unknown(7),
            unknown(8),
            known(lit("acme"), "f", lit("dev"), 9),
            unknown(10),
            known(lit("acme"), "h", Part::Stack, 11),
        ]
    );
}

#[test]
fn a_call_it_cannot_parse_is_unknown_not_dropped() {
    for (t, file) in [
        ("x = StackReference(", "x.py"),
        ("x = StackReference(\"acme/a/dev\"", "x.py"),
        ("const x = new StackReference(`${", "x.ts"),
        ("x, _ := pulumi.NewStackReference(ctx", "x.go"),
    ] {
        assert_eq!(parts(t, file), vec![unknown(1)], "{t}");
    }
}

proptest::proptest! {
    /// Whatever follows the call, the scanner does not panic and the call is a
    /// reference (read or unknown), never dropped.
    #[test]
    fn every_call_is_one_reference(
        tail in "[ -~\n\té€\u{1F600}]{0,40}",
        file in proptest::sample::select(vec!["x.py", "x.ts", "x.go"]),
    ) {
        let call = if file == "x.go" { "NewStackReference(" } else { "StackReference(" };
        let refs = in_code(&format!("{call}{tail}"), Path::new(file));
        proptest::prop_assert!(!refs.is_empty(), "{refs:?}");
    }
}

#[test]
fn garbage_never_panics() {
    for t in [
        "StackReference(",
        "StackReference(f\"{",
        "StackReference(`${",
        "new StackReference(\"a/b/c/d/e\")",
        "NewStackReference(ctx",
        "NewStackReference(ctx, fmt.Sprintf(\"%s%",
        "StackReference(\"\u{1F600}/é/\\",
        "StackReference(((((",
        "StackReference(\"\"\"a",
        "StackReference('''a''' + \"",
        "new StackReference(\"a\", {",
        "new StackReference(\"a\", { name: `${`",
        "NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: ",
        "NewStackReference(ctx, \"x\", &pulumi.StackReferenceArgs{Name: pulumi.String(}",
        "StackReference(a)]})",
        "StackReference(é + ü, stack_name=\u{1F600})",
    ] {
        let _ = in_code(t, Path::new("x.py"));
        let _ = in_code(t, Path::new("x.go"));
    }
    let _ = in_yaml("resources: [1, 2]", Path::new("Pulumi.yaml"));
    let _ = in_yaml(
        "resources:\n  r:\n    type: pulumi:pulumi:StackReference\n    properties:\n      name: ${",
        Path::new("Pulumi.yaml"),
    );
}
