//! Unit tests of what one file's names are read from: config reads, the file's own
//! variables, and what is no reference (comments, docstrings, strings).

use super::*;

/// The references of one code file, read alone, of project `app`.
fn refs(text: &str, file: &str) -> Vec<Reference> {
    repo::in_text(text, Path::new(file), "app")
}

fn config(key: &str) -> Option<Part> {
    Some(Part::Config(key.into()))
}

/// The project part of each reference, and its line.
fn projects(text: &str, file: &str) -> Vec<(Option<Part>, usize)> {
    refs(text, file)
        .into_iter()
        .map(|r| (r.project, r.line))
        .collect()
}

#[test]
fn python_names_read_from_config() {
    let text = r#"import pulumi
config = pulumi.Config()
net = config.require("networkingStack")
a = pulumi.StackReference(config.require("networkingStack"))
b = pulumi.StackReference(config.get("dbStack"))
c = pulumi.StackReference(pulumi.Config("infra").require("eksStack"))
d = pulumi.StackReference(net)
e = pulumi.StackReference(f"{org}/{net}/{pulumi.get_stack()}")
f = pulumi.StackReference(config.require_object("refs"))
"#;
    assert_eq!(
        projects(text, "__main__.py"),
        vec![
            (config("app:networkingStack"), 4),
            (config("app:dbStack"), 5),
            (config("infra:eksStack"), 6),
            (config("app:networkingStack"), 7),
            (config("app:networkingStack"), 8),
            (Some(Part::Unknown), 9),
        ]
    );
    let e = &refs(text, "__main__.py")[4];
    assert_eq!((&e.org, &e.stack), (&Some(Part::Org), &Part::Stack));
    assert_eq!(e.name, "${org}/${config:app:networkingStack}/${stack}");
}

#[test]
fn typescript_names_read_from_config() {
    let text = r#"import * as pulumi from "@pulumi/pulumi";
const config = new pulumi.Config();
const netConfig = new pulumi.Config("net");
const a = new pulumi.StackReference(config.require("k1"));
const b = new pulumi.StackReference(new pulumi.Config().get("k2"));
const c = new pulumi.StackReference(new pulumi.Config("ns").require("k3"));
const d = new pulumi.StackReference(netConfig.require("k4"));
let envName = config.require("env");
const e = new pulumi.StackReference(`acme/network/${envName}`);
"#;
    let found = refs(text, "index.ts");
    assert_eq!(
        found.iter().map(|r| r.project.clone()).collect::<Vec<_>>(),
        vec![
            config("app:k1"),
            config("app:k2"),
            config("ns:k3"),
            config("net:k4"),
            Some(Part::Literal("network".into())),
        ]
    );
    assert_eq!(found[4].stack, Part::Config("app:env".into()));
}

#[test]
fn go_names_read_from_config() {
    let text = "package main\n\
cfg := config.New(ctx, \"\")\n\
net := cfg.Require(\"networkStack\")\n\
a, _ := pulumi.NewStackReference(ctx, cfg.Require(\"k\"), nil)\n\
b, _ := pulumi.NewStackReference(ctx, config.Require(ctx, \"k2\"), nil)\n\
c, _ := pulumi.NewStackReference(ctx, config.Get(ctx, \"other:k3\"), nil)\n\
d, _ := pulumi.NewStackReference(ctx, net, nil)\n\
e, _ := pulumi.NewStackReference(ctx, fmt.Sprintf(\"acme/%s/%s\", net, ctx.Stack()), nil)\n";
    assert_eq!(
        projects(text, "main.go"),
        vec![
            (config("app:k"), 4),
            (config("app:k2"), 5),
            (config("other:k3"), 6),
            (config("app:networkStack"), 7),
            (config("app:networkStack"), 8),
        ]
    );
}

#[test]
fn a_variable_is_read_one_level_deep_and_only_when_assigned_one_way() {
    let text = r#"import pulumi
base = "acme/network"
region = os.environ["REGION"]
name = region
twice = "a"
twice = "b"
x = pulumi.StackReference(f"{base}/dev")  # a module constant
y = pulumi.StackReference(name)
z = pulumi.StackReference(twice)
"#;
    let found = refs(text, "__main__.py");
    assert_eq!(found[0].project, Some(Part::Literal("network".into())));
    assert!(
        found[1].unreadable(),
        "a variable of a variable: {found:#?}"
    );
    assert!(found[2].unreadable(), "assigned two ways: {found:#?}");
}

#[test]
fn config_values_are_put_in_and_the_name_split_again() {
    let lookup = |k: &str| match k {
        "app:whole" => Some("acme/network/dev".to_string()),
        "app:project" => Some("network".to_string()),
        "app:orgAndProject" => Some("acme/network".to_string()),
        _ => None,
    };
    let text = "import pulumi\nc = pulumi.Config()\n\
a = pulumi.StackReference(c.require(\"whole\"))\n\
b = pulumi.StackReference(f\"acme/{c.require('project')}/dev\")\n\
d = pulumi.StackReference(f\"{c.require('orgAndProject')}/{pulumi.get_stack()}\")\n\
e = pulumi.StackReference(c.require(\"unset\"))\n";
    let found: Vec<Reference> = refs(text, "__main__.py")
        .iter()
        .map(|r| r.with_config(&lookup))
        .collect();
    let lit = |s: &str| Some(Part::Literal(s.into()));
    assert_eq!(found[0].org, lit("acme"));
    assert_eq!(found[0].project, lit("network"));
    assert_eq!(found[0].stack, Part::Literal("dev".into()));
    assert_eq!(found[1].project, lit("network"));
    assert_eq!(
        (&found[2].org, &found[2].project),
        (&lit("acme"), &lit("network"))
    );
    assert_eq!(found[2].stack, Part::Stack);
    assert_eq!(found[3].project, config("app:unset"), "unset stays config");
}

#[test]
fn comments_docstrings_and_strings_are_no_references() {
    let py = r#"import pulumi
"""Module docs: pulumi.StackReference("acme/doc/dev")"""
def f():
    '''StackReference("acme/doc2/dev")'''
    msg = "use StackReference('acme/str/dev') to read it"
# StackReference("acme/comment/dev")
real = pulumi.StackReference("acme/real/dev")
"#;
    let lit = |s: &str| Some(Part::Literal(s.into()));
    assert_eq!(projects(py, "__main__.py"), vec![(lit("real"), 7)]);
    let ts = "/*\n * new StackReference(\"acme/doc/dev\")\n */\nconst s = `new StackReference(\"x/y/z\")`;\nconst r = new pulumi.StackReference(\"acme/real/dev\"); // new StackReference(\"a/b/c\")\n";
    assert_eq!(projects(ts, "index.ts"), vec![(lit("real"), 5)]);
    let go = "package main\n/* pulumi.NewStackReference(ctx, \"acme/doc/dev\", nil) */\nvar s = `pulumi.NewStackReference(ctx, \"x/y/z\", nil)`\nr, _ := pulumi.NewStackReference(ctx, \"acme/real/dev\", nil)\n";
    assert_eq!(projects(go, "main.go"), vec![(lit("real"), 4)]);
}

#[test]
fn odd_input_never_panics() {
    let deep = "(".repeat(5000);
    let nested = |open: &str, close: &str| format!("{}x{}", open.repeat(3000), close.repeat(3000));
    let fstrings = format!("StackReference({})", nested("f\"{", "}\""));
    let wrapped = format!("NewStackReference(ctx, {})", nested("pulumi.String(", ")"));
    let templates = format!("new StackReference({})", nested("`${", "}`"));
    let sprintf = format!(
        "NewStackReference(ctx, {})",
        nested("fmt.Sprintf(\"%s\", ", ")")
    );
    for t in [
        "x = \"\"\"never closed StackReference(\"a/b/c\")",
        "const x = `${`${`${",
        "/* StackReference(",
        "def f(:\n  return StackReference(f\"{",
        "from import\nimport\nclass\ndef\nconst\nfunc (",
        "x := config.Require(ctx\nconst (\n\tA = \"",
        "é = StackReference(é)\n€(",
        deep.as_str(),
        fstrings.as_str(),
        wrapped.as_str(),
        templates.as_str(),
        sprintf.as_str(),
    ] {
        for file in ["x.py", "x.ts", "x.go"] {
            let _ = refs(t, file);
            let _ = refs(&format!("{t}StackReference({t}"), file);
        }
    }
}
