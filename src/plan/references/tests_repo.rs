//! Unit tests of what is read across a repository: helper functions and module
//! constants, tests and languages left out, config values of a stack, and resolution.

use std::collections::BTreeMap;

use super::*;
use crate::workspace::profile::tests_support::files as repo_of;

fn lit(s: &str) -> Option<Part> {
    Some(Part::Literal(s.into()))
}

/// (org, project, stack, line, via) of each reference, for short asserts.
type Row = (Option<Part>, Option<Part>, Part, usize, Option<String>);

fn rows(refs: Vec<Reference>) -> Vec<Row> {
    refs.into_iter()
        .map(|r| (r.org, r.project, r.stack, r.line, r.via))
        .collect()
}

const PY_REFS: &str = r#"import pulumi
from lib.names import ORG


def stack_ref(project: str, env: str):
    """A stack of another project: StackReference(name)."""
    return pulumi.StackReference(f"{ORG}/{project}/{env}")


def prod_ref(project):
    return stack_ref(project, "prod")
"#;

const PY_NAMES: &str = "ORG = \"acme\"\nEKS = \"eks-cluster\"\n\n\nclass Projects:\n    NET = \"network\"\n    DB = \"db\"\n";

#[test]
fn python_helpers_with_module_constants_and_class_attributes() {
    let d = repo_of(&[
        ("lib/refs.py", PY_REFS),
        ("lib/names.py", PY_NAMES),
        (
            "projects/app/__main__.py",
            "import pulumi\nfrom lib import refs, names\nfrom lib.names import Projects, EKS\n\
eks = refs.stack_ref(names.EKS, pulumi.get_stack())\n\
net = refs.stack_ref(Projects.NET, \"prod\")\n\
kw = refs.stack_ref(env=pulumi.get_stack(), project=EKS)\n\
two = refs.prod_ref(\"db\")\n",
        ),
    ]);
    let repo = Repo::scan(d.path());
    let found = repo.in_project(&d.path().join("projects/app"), "app");
    let via = Some("lib/refs.py:5 stack_ref".to_string());
    assert_eq!(
        rows(found),
        vec![
            (lit("acme"), lit("eks-cluster"), Part::Stack, 4, via.clone()),
            (
                lit("acme"),
                lit("network"),
                Part::Literal("prod".into()),
                5,
                via.clone()
            ),
            (lit("acme"), lit("eks-cluster"), Part::Stack, 6, via.clone()),
            (
                Some(Part::Unknown),
                Some(Part::Unknown),
                Part::Unknown,
                7,
                Some("lib/refs.py:10 prod_ref, which calls helper stack_ref (not followed)".into())
            ),
        ],
        "a helper calling a helper is not followed: an unknown reference"
    );
}

#[test]
fn a_helper_inside_a_project_is_not_itself_a_reference() {
    let d = repo_of(&[
        ("app/Pulumi.yaml", "name: app\nruntime: python\n"),
        ("app/refs.py", PY_REFS),
        ("app/names.py", PY_NAMES),
        (
            "app/__main__.py",
            "import refs\nx = refs.stack_ref(\"db\", \"dev\")\ny = refs.prod_ref(\"db\")\n",
        ),
    ]);
    let found = in_project(&d.path().join("app"), "app");
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found.iter().all(|r| r.file == Path::new("__main__.py")));
    assert_eq!(found[0].project, lit("db"));
    // The call of prod_ref, which calls stack_ref: not followed.
    assert!(found[1].unreadable(), "{found:#?}");
}

#[test]
fn typescript_and_go_helpers() {
    let d = repo_of(&[
        (
            "lib/refs.ts",
            "import * as pulumi from \"@pulumi/pulumi\";\nconst org = \"acme\";\n\
export const NETWORK = \"network\";\n\
export function ref(project: string) {\n    return new pulumi.StackReference(`${org}/${project}/${pulumi.getStack()}`);\n}\n\
export const arrowRef = (project: string, stack: string) =>\n    new pulumi.StackReference(`${org}/${project}/${stack}`);\n",
        ),
        (
            "projects/web/index.ts",
            "import { ref, NETWORK } from \"../../lib/refs\";\nimport * as refs from \"../../lib/refs\";\n\
const a = ref(NETWORK);\nconst b = refs.arrowRef(refs.NETWORK, \"prod\");\n",
        ),
        (
            "lib/refs/refs.go",
            "package refs\n\nimport (\n\t\"fmt\"\n\t\"github.com/pulumi/pulumi/sdk/v3/go/pulumi\"\n)\n\n\
const (\n\tNetwork = \"network\"\n\tDB string = \"db\"\n)\n\n\
func Ref(ctx *pulumi.Context, project string) (*pulumi.StackReference, error) {\n\
\treturn pulumi.NewStackReference(ctx, fmt.Sprintf(\"acme/%s/%s\", project, ctx.Stack()), nil)\n}\n",
        ),
        (
            "projects/api/main.go",
            "package main\n\nimport (\n\t\"github.com/acme/infra/lib/refs\"\n)\n\n\
func main() {\n\tnet, _ := refs.Ref(ctx, refs.Network)\n\tdb, _ := refs.Ref(ctx, refs.DB)\n}\n",
        ),
    ]);
    let repo = Repo::scan(d.path());
    let web = rows(repo.in_project(&d.path().join("projects/web"), "web"));
    assert_eq!(
        web,
        vec![
            (
                lit("acme"),
                lit("network"),
                Part::Stack,
                3,
                Some("lib/refs.ts:4 ref".into())
            ),
            (
                lit("acme"),
                lit("network"),
                Part::Literal("prod".into()),
                4,
                Some("lib/refs.ts:7 arrowRef".into())
            ),
        ]
    );
    let api = rows(repo.in_project(&d.path().join("projects/api"), "api"));
    let via = Some("lib/refs/refs.go:13 Ref".to_string());
    assert_eq!(
        api,
        vec![
            (lit("acme"), lit("network"), Part::Stack, 8, via.clone()),
            (lit("acme"), lit("db"), Part::Stack, 9, via),
        ]
    );
}

#[test]
fn tests_of_a_project_and_files_that_are_no_utf8_are_not_read() {
    let call = "import pulumi\npulumi.StackReference(\"acme/x/dev\")\n";
    let ts = "new StackReference(\"acme/x/dev\");\n";
    let go = "pulumi.NewStackReference(ctx, \"acme/x/dev\", nil)\n";
    let d = repo_of(&[
        ("app/__main__.py", call),
        ("app/test_main.py", call),
        ("app/main_test.py", call),
        ("app/conftest.py", call),
        ("app/tests/helpers.py", call),
        ("app/test/x.py", call),
        ("app/__tests__/a.ts", ts),
        ("app/index.test.ts", ts),
        ("app/index.spec.js", ts),
        ("app/main_test.go", go),
    ]);
    std::fs::write(
        d.path().join("app/latin1.py"),
        b"x = StackReference(\"\xe9\")\n",
    )
    .unwrap();
    let files: Vec<PathBuf> = in_project(&d.path().join("app"), "app")
        .into_iter()
        .map(|r| r.file)
        .collect();
    assert_eq!(files, vec![PathBuf::from("__main__.py")]);
    assert_eq!(
        source_files(&d.path().join("app")),
        vec![PathBuf::from("__main__.py"), PathBuf::from("latin1.py")]
    );
}

#[test]
fn languages_strata_does_not_read_are_named() {
    let d = repo_of(&[
        ("cs/Pulumi.yaml", "name: cs\nruntime: dotnet\n"),
        ("cs/Program.cs", "class P {}\n"),
        ("java/Pulumi.yaml", "name: j\nruntime:\n  name: java\n"),
        ("fs/Pulumi.yaml", "name: f\nruntime: yaml\n"),
        ("fs/src/Stack.fs", "module Stack\n"),
        ("py/Pulumi.yaml", "name: py\nruntime: python\n"),
        ("py/__main__.py", "import pulumi\n"),
    ]);
    let cs = not_read(&d.path().join("cs")).unwrap();
    assert_eq!(cs.to_string(), "runtime dotnet: C#");
    assert_eq!(
        not_read(&d.path().join("java")).unwrap().runtime.as_deref(),
        Some("java")
    );
    let fs = not_read(&d.path().join("fs")).unwrap();
    assert_eq!(fs.files, vec![PathBuf::from("src/Stack.fs")]);
    assert_eq!(not_read(&d.path().join("py")), None);
}

#[test]
fn config_values_are_the_projects_file_with_the_shared_one_laid_over_it() {
    let d = repo_of(&[
        ("a/Pulumi.yaml", "name: a\nruntime: python\n"),
        (
            "a/Pulumi.dev.yaml",
            "config:\n  net: acme/network/dev\n  both: mine\n  a:secret:\n    secure: v1:xyz\n  other:key: 3\n",
        ),
        (
            "b/Pulumi.yaml",
            "name: b\nruntime: python\nstackConfigDir: cfg\nconfig:\n  region:\n    default: east\n  b:net: default\n",
        ),
        ("b/cfg/Pulumi.dev.yaml", "config:\n  b:net: from-b\n"),
        (
            "shared/Pulumi.dev.yaml",
            "config:\n  a:both: shared\n  a:only: shared\n  a:secret: plain\n",
        ),
    ]);
    let shared = d.path().join("shared/Pulumi.dev.yaml");
    let a = StackValues::load(&d.path().join("a"), "a", "dev", Some(&shared));
    assert_eq!(a.get("a:net").as_deref(), Some("acme/network/dev"));
    assert_eq!(
        a.get("a:both").as_deref(),
        Some("shared"),
        "the profile's key runs, as strata lays it over the project's"
    );
    assert_eq!(a.get("a:only").as_deref(), Some("shared"));
    assert_eq!(
        a.get("a:secret").as_deref(),
        Some("plain"),
        "the shared plain value is what runs; a secure one is never read"
    );
    assert_eq!(a.get("other:key").as_deref(), Some("3"));
    assert_eq!(
        config_value(&d.path().join("b"), "b", "dev", "b:net", None).as_deref(),
        Some("from-b")
    );
    assert_eq!(stacks_of(&d.path().join("b")), vec!["dev".to_string()]);
    let b_prod = |key: &str| config_value(&d.path().join("b"), "b", "prod", key, None);
    assert_eq!(
        b_prod("b:net").as_deref(),
        Some("default"),
        "Pulumi.yaml's default"
    );
    assert_eq!(b_prod("b:region").as_deref(), Some("east"));
    assert_eq!(b_prod("b:nope"), None);
}

fn projects(names: &[(&str, &str)]) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (name, folder) in names {
        out.entry(name.to_string())
            .or_default()
            .push(folder.to_string());
    }
    out
}

/// The reference of the Python stack name expression `name`, in project `app`.
fn reference_of(name: &str) -> Reference {
    let text = format!("import pulumi\nc = pulumi.Config()\nr = pulumi.StackReference({name})\n");
    repo::in_text(&text, Path::new("x.py"), "app").remove(0)
}

#[test]
fn resolution_of_each_form() {
    let all = projects(&[
        ("app", "apps/app"),
        ("network-east", "net/east"),
        ("db", "data/db1"),
        ("db", "data/db2"),
        ("cache-a", "c/a"),
        ("cache-b", "c/b"),
    ]);
    let config = |k: &str| (k == "app:net").then(|| "acme/network-east/dev".to_string());
    let resolve = |name: &str| resolve(&reference_of(name), "app", &all, &config);
    let resolved = |f: &str| Resolution::Resolved { folder: f.into() };
    assert_eq!(resolve("\"acme/network-east/dev\""), resolved("net/east"));
    assert_eq!(resolve("c.require(\"net\")"), resolved("net/east"));
    assert_eq!(resolve("\"dev\""), Resolution::SelfRef);
    assert_eq!(resolve("f\"acme/app/{x}\""), Resolution::SelfRef);
    let why = |r: Resolution| match r {
        Resolution::Unresolved { why } | Resolution::Inferred { why, .. } => why,
        other => panic!("{other:?}"),
    };
    assert_eq!(
        why(resolve("\"acme/db/dev\"")),
        "2 projects are named `db` (data/db1, data/db2)"
    );
    assert_eq!(
        why(resolve("\"acme/nope/dev\"")),
        "no project here is named `nope`"
    );
    let inferred = resolve("f\"acme/network-{region}/dev\"");
    assert_eq!(inferred.folder(), Some("net/east"));
    assert!(why(inferred).contains("`network-*` fits only project `network-east`"));
    assert!(why(resolve("f\"acme/cache-{x}/dev\"")).contains("fits 2 (cache-a, cache-b)"));
    assert!(why(resolve("f\"acme/queue-{x}/dev\"")).contains("no project's name fits `queue-*`"));
    assert!(why(resolve("c.require(\"unset\")")).contains("config `app:unset` has no value"));
    assert!(why(resolve("name")).contains("computed"));
}

/// The cost on a large repository: 350 projects, 3,000 code files (run with
/// `--ignored --nocapture` to see the time).
#[test]
#[ignore]
fn large_repository_is_read_once() {
    let d = tempfile::tempdir().unwrap();
    let write = |rel: String, text: String| {
        let p = d.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    let filler: String = (0..80)
        .map(|i| format!("def f{i}(x, y):\n    \"\"\"Docs.\"\"\"\n    return x + y  # {i}\n"))
        .collect();
    write("lib/refs.py".into(), PY_REFS.into());
    write("lib/names.py".into(), PY_NAMES.into());
    for i in 0..50 {
        write(
            format!("lib/mod{i}.py"),
            format!("NAME{i} = \"n{i}\"\n{filler}"),
        );
    }
    for p in 0..350 {
        write(
            format!("projects/p{p}/Pulumi.yaml"),
            format!("name: p{p}\nruntime: python\n"),
        );
        let main = format!(
            "import pulumi\nfrom lib import refs, names\nc = pulumi.Config()\n\
a = refs.stack_ref(\"p{}\", pulumi.get_stack())\nb = pulumi.StackReference(c.require(\"net\"))\n\
e = pulumi.StackReference(f\"acme/p{}/{{pulumi.get_stack()}}\")\n{filler}",
            (p + 1) % 350,
            (p + 2) % 350
        );
        write(format!("projects/p{p}/__main__.py"), main);
        for m in 0..7 {
            write(format!("projects/p{p}/mod{m}.py"), filler.clone());
        }
    }
    let first = std::time::Instant::now();
    drop(Repo::scan(d.path()));
    let first = first.elapsed();
    let start = std::time::Instant::now();
    let repo = Repo::scan(d.path());
    let scanned = start.elapsed();
    let mut count = 0;
    for p in 0..350 {
        count += repo
            .in_project(&d.path().join(format!("projects/p{p}")), &format!("p{p}"))
            .len();
    }
    eprintln!(
        "large repository: first scan {first:?}; again: scan {scanned:?}, scan and every project's references {:?} ({count} references)",
        start.elapsed()
    );
    assert_eq!(count, 350 * 3);
}
