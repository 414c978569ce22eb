//! Issue 45 with the real CLI: `up` on a terminal shows and asks once, like `pulumi up`,
//! and applies exactly the plans it showed; a fresh bundle goes out wave by wave, a
//! dependent previewed on projected outputs going out when its real plan is the one
//! reviewed and waiting for `strata approve` when it is not; an output another project
//! reads, removed, is named in the preview and denied by an `output-removed` rule.

use super::*;

const ASK: &str = "Do you want to perform this update?";

/// `strata up` of the real-Pulumi profile on a pseudo-terminal, answering `answer`.
fn up_answering(r: &Real, answer: &str) -> (String, i32) {
    crate::pipeline::answering(
        &r.ws,
        &["up", "-p", "local-pulumi", "-s", "dev"],
        &[(ASK, answer)],
    )
}

/// The `pulumi up` calls among `calls`, in order.
fn updates(calls: &[String]) -> Vec<&String> {
    calls.iter().filter(|c| c.starts_with("up ")).collect()
}

#[test]
fn up_on_a_terminal_asks_once_and_applies_exactly_the_real_plans_shown() {
    let Some(r) = Real::with_local_pulumi("up_on_a_terminal_asks_once") else {
        return;
    };
    let _guard = crate::leftovers::KillLeftovers(r.ws.root.clone());
    let (out, code) = up_answering(&r, "no");
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("Nothing was changed"), "{out}");
    let calls = r.take_calls();
    assert!(updates(&calls).is_empty(), "no update: {calls:#?}");
    assert!(!r.env_dir().join("network").exists(), "nothing was built");

    let (out, code) = up_answering(&r, "yes");
    assert_eq!(code, 0, "{out}");
    let calls = r.take_calls();
    let ups = updates(&calls);
    assert_eq!(ups.len(), ALL.len(), "{calls:#?}");
    // What the preview could preview goes out as its saved plan; what waited behind a
    // stack not yet deployed (a StackReference) is brought up as the table said.
    for p in ["network", "registry"] {
        let up = ups
            .iter()
            .find(|c| c.contains(&format!("projects/local-pulumi/{p} ")))
            .unwrap_or_else(|| panic!("no update of {p}: {calls:#?}"));
        assert!(
            up.contains(".strata/dev/reviews/") && up.contains("--plan"),
            "{p}: the plan shown: {up}"
        );
    }
    assert!(r.env_dir().join("app").exists(), "{out}");

    // Deployed: a change to the app is shown, asked, and its plan applied.
    r.edit(
        "projects/local-pulumi/app/Pulumi.yaml",
        "default: 1",
        "default: 2",
    );
    let (out, code) = up_answering(&r, "yes");
    assert_eq!(code, 0, "{out}");
    let calls = r.take_calls();
    let app = updates(&calls)
        .into_iter()
        .find(|c| c.contains("projects/local-pulumi/app "))
        .unwrap_or_else(|| panic!("no update of the app: {calls:#?}"))
        .clone();
    assert!(
        app.contains("--plan") && app.contains("plans/local-pulumi_2fapp.json"),
        "{app}"
    );
    let left = crate::leftovers::leftover_language_hosts(&r.ws.root);
    assert!(left.is_empty(), "left running:\n{}", left.join("\n"));
}

/// A [`Real`] for `test` (`None`: skipped), with a guard that kills what a failure leaves
/// running: two wired projects on a fresh stack, `up1`'s `value` from a command's stdout
/// (not known until it runs) unless `known`; `up1`'s entry mocks it as `mocked`. Their
/// preview saved the plan bundle `bundle`.
fn wired_fresh(test: &str, known: bool) -> Option<(Real, crate::leftovers::KillLeftovers)> {
    let r = Real::new(test)?;
    let guard = crate::leftovers::KillLeftovers(r.ws.root.clone());
    r.ws.profile(
        "wired",
        "description: two wired projects\ninfra_type: test\ninfrastructure:\n  - path: up1\n    mock_outputs: { value: mocked }\n  - path: down1\n    inputs:\n      rp-down1:v: up1:value\n",
    );
    let value = if known { "from-up1" } else { "${c.stdout}" };
    r.ws.pulumi_project(
        "up1",
        "rp-up1",
        &format!("resources:\n  c:\n    type: command:local:Command\n    properties:\n      create: echo from-up1\noutputs:\n  value: {value}\n"),
    );
    r.ws.pulumi_project(
        "down1",
        "rp-down1",
        "config:\n  v:\n    type: string\nresources:\n  d:\n    type: command:local:Command\n    properties:\n      create: echo got ${v}\noutputs:\n  got: ${d.stdout}\n",
    );
    let saved = r.on("wired", &["preview", "--save-plan", "bundle"]);
    assert_eq!(saved.code, 0, "{saved:?}");
    let m = r.ws.read("bundle/manifest.json");
    assert!(m.contains("\"projected\""), "down1 projected: {m}");
    Some((r, guard))
}

#[test]
fn a_fresh_real_bundle_goes_out_wave_by_wave_or_waits_when_the_real_plan_differs() {
    // up1's preview knew the value: down1's real plan is the one reviewed.
    let Some((r, _guard)) = wired_fresh("a_fresh_real_bundle_goes_out_wave_by_wave", true) else {
        return;
    };
    r.take_calls();
    let up = r.on("wired", &["up", "--plan", "bundle", "--output", "json"]);
    assert_eq!(up.code, 0, "{up:?}");
    assert_statuses(&up, &[("up1", "succeeded"), ("down1", "succeeded")]);
    let calls = r.take_calls();
    let down: Vec<&String> = calls
        .iter()
        .filter(|c| c.contains("projects/down1 "))
        .collect();
    assert_eq!(
        down.len(),
        2,
        "a preview on the real outputs, then the update: {down:#?}"
    );
    assert!(
        down[1].starts_with("up ") && down[1].contains("bundle/plans/down1.json"),
        "{down:#?}"
    );
}

#[test]
fn a_fresh_real_bundle_whose_mock_was_wrong_waits_for_an_approval() {
    let Some((r, _guard)) = wired_fresh("a_fresh_real_bundle_whose_mock_was_wrong", false) else {
        return;
    };
    let up = r.on("wired", &["up", "--plan", "bundle", "--output", "json"]);
    assert_eq!(up.code, 6, "{up:?}");
    assert_statuses(&up, &[("up1", "succeeded"), ("down1", "awaiting")]);
    assert!(
        up.all()
            .contains("not the one reviewed on projected inputs"),
        "{up:?}"
    );
    let approved = r.on("wired", &["approve", "down1", "--yes"]);
    assert_eq!(approved.code, 0, "{approved:?}");
    r.take_calls();
    let again = r.on("wired", &["up", "--output", "json"]);
    assert_eq!(again.code, 0, "{again:?}");
    assert_statuses(&again, &[("down1", "succeeded")]);
    let calls = r.take_calls();
    let last = calls
        .iter()
        .rfind(|c| c.contains("projects/down1 "))
        .unwrap_or_else(|| panic!("{calls:#?}"));
    assert!(
        last.starts_with("up ") && last.contains("approvals/down1/plan.json"),
        "{last}"
    );
}

#[test]
fn a_read_output_removed_is_named_by_the_real_preview_and_denied_by_a_rule() {
    let Some((r, _)) = Real::deployed("a_read_output_removed_is_named") else {
        return;
    };
    // The network stops exporting `cidr`, which the cluster's program reads.
    r.edit(
        "projects/local-pulumi/network/Pulumi.yaml",
        "  cidr: ${cidr}",
        "  old_cidr: ${cidr}",
    );
    let named = lp(&r, &["preview"]);
    assert_eq!(named.code, 0, "{named:?}");
    assert!(
        named.all().contains("removes output `cidr`, which local-pulumi/cluster reads (projects/local-pulumi/cluster/Pulumi.yaml:"),
        "{named:?}"
    );
    crate::real_pulumi::gates::set_policy(
        &r,
        "  - name: contracts\n    select: local-pulumi/network\n    deny: [output-removed]\n",
    );
    let denied = lp(&r, &["up"]);
    assert_eq!(denied.code, 5, "{denied:?}");
    assert_eq!(status_of(&denied, "local-pulumi/network"), "denied");
    let still = r.pulumi(
        "local-pulumi/network",
        &["stack", "output", "cidr", "--stack", "dev"],
    );
    assert_eq!(still.code, 0, "the stack still outputs it: {still:?}");
}
