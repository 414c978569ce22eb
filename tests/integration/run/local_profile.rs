//! The `local` profile this repository ships runs `up` and `destroy` end to end
//! without pulumi, making and removing its environment under `.strata/`.

use std::path::Path;

use crate::support::*;

#[test]
fn the_local_profile_runs_end_to_end_without_pulumi() {
    let ws = Ws::without_pulumi();
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(
        repo.join("providers/local.yaml"),
        ws.path("providers/local.yaml"),
    )
    .unwrap();
    copy_path(&repo.join("projects/local"), &ws.path("projects/local"));

    let r = ws.strata(&["up", "--provider", "local", "--stack", "t"]);
    assert_eq!(r.code, 0, "{r:?}");
    let made = ws.files_under(".strata/t/local-env");
    assert!(
        !made.is_empty(),
        "the local environment is made under .strata/t/local-env: {r:?}"
    );
    // Every project of the profile left something there.
    for p in [
        "network", "registry", "cluster", "ingress", "logstore", "app",
    ] {
        assert!(
            made.iter().any(|(f, _)| f.to_string_lossy().contains(p)),
            "nothing of local/{p} under .strata/t/local-env: {made:?}"
        );
    }

    // The tour's preview after that up: every project says it is deployed, none
    // "would create" what is there.
    let p = ws.strata(&["preview", "--provider", "local", "--stack", "t"]);
    assert_eq!(p.code, 0, "{p:?}");
    for project in [
        "network", "registry", "cluster", "ingress", "logstore", "app",
    ] {
        let row = p
            .stdout
            .lines()
            .find(|l| l.starts_with(&format!("local/{project} ")))
            .unwrap_or_else(|| panic!("no row of local/{project}: {p:?}"));
        assert!(row.contains("no changes: deployed"), "{row}");
    }
    assert!(!p.stdout.contains("would create"), "{p:?}");

    let r = ws.strata(&["destroy", "--provider", "local", "--stack", "t", "--yes"]);
    assert_eq!(r.code, 0, "{r:?}");
    let left = ws.files_under(".strata/t/local-env");
    assert!(left.is_empty(), "destroy removes what up made: {left:?}");
}
