//! Traces with the real CLI: Pulumi's own spans nest under the project span that ran them.

use super::*;

/// The `TRACEPARENT` and `--otel-traces` strata hands the real CLI: Pulumi's own spans
/// (the CLI's, its engine's, its plugins') land in the run's trace, each one's parent
/// chain reaching the span of the project whose step ran it. (Pulumi 3.274.1 also sends
/// a few spans it starts with no parent, each its own trace: the engine's `Engine/Log`
/// server calls, a provider's handshake, schema and health checks, stack reference
/// reads; docs/research/pulumi-tracing.md.)
#[test]
fn pulumi_spans_nest_under_the_project_span_that_ran_them() {
    let Some(mut r) = Real::with_local_pulumi("real_pulumi::traces") else {
        return;
    };
    let otlp = crate::otlp::Receiver::start();
    r.ws.set_env("OTEL_EXPORTER_OTLP_ENDPOINT", &otlp.endpoint());
    let run = up(&r);
    assert_eq!(run.code, 0, "{run:?}");
    let url = format!("--otel-traces={}/v1/traces", otlp.endpoint());
    let calls = r.take_calls();
    for c in calls.iter().filter(|c| c.contains("--stack")) {
        assert!(
            c.contains(&url),
            "a project's Pulumi call without {url}: {c}"
        );
    }
    // Pulumi sends its spans as it exits, strata at the end of its run: all are in.
    assert!(otlp.problems().is_empty(), "{:?}", otlp.problems());
    let spans = otlp.spans();
    let by_id: std::collections::BTreeMap<&str, &crate::otlp::Span> =
        spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let root = spans
        .iter()
        .find(|s| s.parent.is_empty() && s.service == "strata")
        .unwrap_or_else(|| panic!("no run span: {spans:#?}"));
    let projects = spans
        .iter()
        .filter(|s| s.service == "strata" && s.parent == root.span_id)
        .count();
    assert_eq!(projects, ALL.len(), "{spans:#?}");
    // Per project: the Pulumi spans under it, by name.
    let mut under = std::collections::BTreeMap::<String, Vec<String>>::new();
    for s in spans
        .iter()
        .filter(|s| s.service != "strata" && s.trace_id == root.trace_id)
    {
        let mut at = s;
        let mut hops = 0;
        while at.service != "strata" {
            at = by_id
                .get(at.parent.as_str())
                .unwrap_or_else(|| panic!("{s:#?}: the chain breaks at {at:#?}"));
            hops += 1;
            assert!(hops < 100, "a circle of parents at {s:#?}");
        }
        assert_eq!(
            at.parent, root.span_id,
            "{s:#?} reaches {at:#?}, not a project"
        );
        under
            .entry(at.name.clone())
            .or_default()
            .push(s.name.clone());
    }
    for p in ALL {
        let names = under.get(p).cloned().unwrap_or_default();
        // The CLI's root span, its engine's update, the program's resources, and the
        // provider's own spans (the command provider, through its gRPC server).
        for want in [
            "pulumi",
            "pulumi-plan",
            "pulumirpc.ResourceMonitor/RegisterResource",
            "pulumirpc.ResourceProvider/Create",
        ] {
            assert!(
                names.iter().any(|n| n == want),
                "{p}: no {want} among {names:?}"
            );
        }
    }
    // Each CLI call's root span is a child of its project's span itself.
    for s in spans
        .iter()
        .filter(|s| s.name == "pulumi" && s.service == "pulumi-cli")
    {
        let parent = by_id[s.parent.as_str()];
        assert_eq!(
            (parent.service.as_str(), parent.parent.as_str()),
            ("strata", root.span_id.as_str())
        );
    }
    let text = format!("{spans:?}");
    // Neither strata's spans nor Pulumi's carry a secret or an output (the network's).
    assert!(!text.contains("10.77.0.0"), "an output in the trace");
    for secret in [REGISTRY_PASSWORD, PASSPHRASE, "store-passphrase-for-tests"] {
        assert!(!text.contains(secret), "{secret:?} in the trace");
    }
}
