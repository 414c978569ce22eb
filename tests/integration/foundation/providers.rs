//! `strata providers` (and `list-providers`): the profiles, sorted, with descriptions.

use super::*;

#[test]
fn providers_are_listed_sorted_with_descriptions() {
    let ws = Ws::new();
    ws.profile("zeta", "description: Zeta cloud\ninfra_type: Z\n");
    ws.profile("alpha", "description: Alpha cloud\ninfra_type: A\n");
    ws.profile("mid", "description: Middle cloud\ninfra_type: M\n");
    ws.write("providers/common/k.yaml", "- path: x\n");
    for cmd in ["providers", "list-providers"] {
        let r = ws.strata(&[cmd]);
        assert_eq!(r.code, 0, "{r:?}");
        let lines: Vec<&str> = r.stdout.lines().filter(|l| !l.trim().is_empty()).collect();
        let names: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|n| ["alpha", "mid", "zeta"].contains(n))
            .collect();
        assert_eq!(names, ["alpha", "mid", "zeta"], "sorted\n{r:?}");
        for (name, desc) in [
            ("alpha", "Alpha cloud"),
            ("mid", "Middle cloud"),
            ("zeta", "Zeta cloud"),
        ] {
            assert!(
                lines.iter().any(|l| l.contains(name) && l.contains(desc)),
                "{name} with its description\n{r:?}"
            );
        }
        assert!(
            !r.stdout.contains("common"),
            "fragments are not providers\n{r:?}"
        );
    }
}

#[test]
fn providers_as_json() {
    let ws = Ws::new();
    ws.profile("zeta", "description: Zeta cloud\ninfra_type: Z\n");
    ws.profile("alpha", "description: Alpha cloud\ninfra_type: A\n");
    let r = ws.strata(&["providers", "--output", "json"]);
    assert_eq!(r.code, 0, "{r:?}");
    let v: Value = serde_json::from_str(r.stdout.trim()).unwrap_or_else(|e| panic!("{e}\n{r:?}"));
    let list = v.as_array().expect("a JSON array");
    let names: Vec<&str> = list.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["alpha", "zeta"]);
    assert_eq!(list[0]["description"], "Alpha cloud");
    assert_eq!(list[1]["description"], "Zeta cloud");
    let r2 = ws.strata(&["list-providers", "--output", "json"]);
    assert_eq!(r2.stdout, r.stdout);
}
