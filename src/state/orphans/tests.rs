use super::program::{Found, History};
use super::*;

fn known(path: &str, needs: &[&str]) -> KnownProject {
    KnownProject {
        project: path.into(),
        dir: format!("projects/{path}"),
        kind: "pulumi".into(),
        name: path.into(),
        stage: "infrastructure".into(),
        needs: needs.iter().map(|s| s.to_string()).collect(),
    }
}

fn run(id: &str, graph: Vec<KnownProject>) -> Record {
    Record::Run {
        run_id: id.into(),
        operation: "up".into(),
        provider: "p".into(),
        stack: "dev".into(),
        projects: vec![],
        started_at: String::new(),
        command: String::new(),
        user: String::new(),
        host: String::new(),
        graph,
    }
}

fn done(id: &str, project: &str, op: &str, at: &str) -> Record {
    let json = serde_json::json!({
        "record": "project", "run_id": id, "project": project, "operation": op,
        "status": "succeeded", "ended_at": at,
    });
    serde_json::from_value(json).unwrap()
}

/// What a profile of `(path, Pulumi project name)` entries runs, each in
/// `projects/<path>`.
fn current(entries: &[(&str, &str)]) -> Current {
    let mut c = Current::default();
    for (path, name) in entries {
        let mut k = known(path, &[]);
        k.name = name.to_string();
        c.paths.insert(k.project.clone());
        c.managed.insert((k.kind.clone(), k.name.clone()));
        c.dirs.insert(k.dir);
    }
    c
}

/// Issue 43: a folder renamed with its entry runs the same Pulumi project, so the same
/// stack; two entries sharing a project share it: none is an orphan. A command project
/// is known by its name the same way.
#[test]
fn what_a_current_entry_runs_is_no_orphan() {
    let mut cmd = known("seed", &[]);
    cmd.kind = "command".into();
    let records = vec![
        run("1", vec![known("db", &[]), known("gone", &[]), cmd]),
        done("1", "db", "up", "t1"),
        done("1", "gone", "up", "t1"),
        done("1", "seed", "up", "t1"),
    ];
    let mut now = current(&[("database", "db")]);
    now.managed.insert(("command".into(), "seed".into()));
    assert_eq!(paths(&find(&records, &now, "projects")), ["gone"]);
}

fn paths(orphans: &[Orphan]) -> Vec<&str> {
    orphans.iter().map(|o| o.known.project.as_str()).collect()
}

#[test]
fn a_deployed_project_the_profile_lost_is_an_orphan_with_who_needed_it() {
    let records = vec![
        run(
            "1",
            vec![
                known("vpc", &[]),
                known("db", &["vpc"]),
                known("app", &["db"]),
            ],
        ),
        done("1", "vpc", "up", "t1"),
        done("1", "db", "up", "t2"),
        done("1", "app", "up", "t3"),
    ];
    let found = find(
        &records,
        &current(&[("vpc", "vpc"), ("app", "app")]),
        "projects",
    );
    assert_eq!(paths(&found), ["db"]);
    assert_eq!(found[0].needed_by, ["app"]);
    assert_eq!(found[0].known.needs, ["vpc"]);
    assert_eq!(found[0].deployed_at, "t2");
}

#[test]
fn a_destroyed_or_never_deployed_project_is_no_orphan() {
    let records = vec![
        run("1", vec![known("a", &[]), known("b", &[]), known("c", &[])]),
        done("1", "a", "up", "t1"),
        done("1", "b", "up", "t1"),
        done("2", "b", "destroy", "t2"),
    ];
    assert_eq!(
        paths(&find(&records, &Current::default(), "projects")),
        ["a"]
    );
}

#[test]
fn the_last_graph_that_had_a_project_says_where_it_was() {
    let mut moved = known("db", &[]);
    moved.dir = "infra/db".into();
    let records = vec![
        run("1", vec![known("db", &[])]),
        done("1", "db", "up", "t1"),
        run("2", vec![moved]),
        run("3", vec![known("other", &[])]),
    ];
    let found = find(&records, &Current::default(), "projects");
    assert_eq!(found[0].known.dir, "infra/db");
}

#[test]
fn a_project_deployed_before_graphs_were_kept_is_found_in_the_projects_folder() {
    let records = vec![done("1", "old", "up", "t1")];
    let found = find(&records, &Current::default(), "stacks");
    assert_eq!(found[0].known.dir, "stacks/old");
    assert!(
        found[0].known.name.is_empty(),
        "its kind is learnt from its folder"
    );
    let found = find(&records, &Current::default(), ".");
    assert_eq!(found[0].known.dir, "old");
}

#[test]
fn the_description_names_folder_resources_dependents_and_outputs() {
    let o = Orphan {
        known: known("db", &[]),
        deployed_at: "t".into(),
        needed_by: vec!["app".into()],
        resources: Some(3),
        outputs: Some(serde_json::from_str(r#"{"url":"x","pw":"[secret]"}"#).unwrap()),
    };
    assert_eq!(
        describe(&o),
        "db (projects/db, deployed t), 3 resource(s) in the backend; needed by app; outputs pw=[secret], url=x"
    );
}

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&ok.stderr)
    );
}

use std::process::Command;

#[test]
fn a_program_is_taken_in_place_else_from_the_revision_before_its_removal() {
    let repo = tempfile::tempdir().unwrap();
    // The workspace is a folder of the repository, as in a monorepo.
    let root = repo.path().join("env");
    std::fs::create_dir_all(root.join("projects/db")).unwrap();
    std::fs::write(root.join("projects/db/Pulumi.yaml"), "name: db\n").unwrap();
    std::fs::create_dir_all(root.join("providers")).unwrap();
    std::fs::write(root.join("providers/aws.yaml"), "{}\n").unwrap();
    std::fs::write(repo.path().join("shared.txt"), "lib\n").unwrap();
    git(repo.path(), &["init", "-q"]);
    git(repo.path(), &["add", "."]);
    git(repo.path(), &["commit", "-qm", "db"]);
    let mut h = History::new(&root);
    let db = KnownProject {
        dir: "projects/db".into(),
        ..known("db", &[])
    };
    assert_eq!(
        h.base_for(&db, "dev").unwrap(),
        (root.clone(), Found::InPlace)
    );
    git(repo.path(), &["rm", "-rq", "env/projects/db"]);
    git(repo.path(), &["commit", "-qm", "drop db"]);
    let (base, found) = h.base_for(&db, "dev").unwrap();
    assert!(
        matches!(found, Found::Revision(ref r) if r.len() == 40),
        "{found:?}"
    );
    assert_eq!(
        std::fs::read_to_string(base.join("projects/db/Pulumi.yaml")).unwrap(),
        "name: db\n"
    );
    assert!(
        base.join("../shared.txt").is_file(),
        "the whole tree is copied"
    );
    // Private: the folder 0700, nothing in it open to others (issue 43, item 10).
    use std::os::unix::fs::PermissionsExt;
    let copy = base.parent().unwrap().to_path_buf();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&copy), 0o700, "{}", copy.display());
    for p in [
        copy.join("shared.txt"),
        base.join("projects"),
        base.join("projects/db/Pulumi.yaml"),
    ] {
        assert_eq!(mode(&p) & 0o077, 0, "{} is {:o}", p.display(), mode(&p));
    }
    drop(h);
    assert!(!copy.exists(), "the copy goes with the run");
}

#[test]
fn a_program_no_revision_has_is_refused_with_the_steps() {
    let repo = tempfile::tempdir().unwrap();
    git(repo.path(), &["init", "-q"]);
    let mut h = History::new(repo.path());
    let e = h.base_for(&known("db", &[]), "dev").unwrap_err();
    assert!(
        e.message.contains("orphan `db`: its program is gone"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("pulumi destroy --stack dev"),
        "{}",
        e.message
    );
    assert!(
        e.message.contains("strata destroy --orphans"),
        "{}",
        e.message
    );
}
