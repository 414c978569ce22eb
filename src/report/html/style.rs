//! The page's look: the colour of each way a project can end, and the inline style sheet.

pub(super) const SUCCEEDED: &str = "#2da44e";
pub(super) const FAILED: &str = "#cf222e";
pub(super) const CANCELLED: &str = "#e16f24";
pub(super) const SKIPPED: &str = "#8c959f";
pub(super) const BLOCKED: &str = "#8250df";
/// A `policy:` rule stopped it: denied, or held for an approval.
pub(super) const DENIED: &str = "#a40e26";
pub(super) const AWAITING: &str = "#9a6700";
const UNKNOWN: &str = "#afb8c1";
/// The outline of the critical path.
pub(super) const CRITICAL: &str = "#0a3069";

pub(super) const CSS: &str = r#"
:root { color-scheme: light; }
* { box-sizing: border-box; }
body { margin: 0; background: #f6f8fa; color: #1f2328;
  font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", "Liberation Sans", sans-serif; }
main { max-width: 1200px; margin: 0 auto; padding: 20px 24px 40px; }
h1 { font-size: 22px; margin: 0 0 2px; }
h2 { font-size: 16px; margin: 0 0 10px; }
h3 { font-size: 14px; margin: 14px 0 6px; }
code, pre, .mono { font-family: "DejaVu Sans Mono", "Liberation Mono", ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12.5px; }
.sub { color: #59636e; margin: 0; }
.badge { display: inline-block; padding: 1px 10px; border-radius: 999px; color: #fff; font-size: 13px; font-weight: 600; vertical-align: 3px; margin-left: 8px; }
.badge.succeeded { background: #2da44e; } .badge.failed { background: #cf222e; }
.badge.cancelled { background: #e16f24; } .badge.incomplete { background: #6e7781; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; margin: 16px 0; }
.card { background: #fff; border: 1px solid #d1d9e0; border-radius: 8px; padding: 8px 14px; min-width: 150px; }
.card .v { font-size: 21px; font-weight: 600; }
.card .k { color: #59636e; font-size: 12px; }
section { background: #fff; border: 1px solid #d1d9e0; border-radius: 8px; padding: 14px 16px; margin: 14px 0; }
.legend { color: #59636e; font-size: 13px; margin: 0 0 8px; }
.legend span { margin-right: 14px; white-space: nowrap; }
.sw { display: inline-block; width: 14px; height: 10px; border-radius: 2px; margin-right: 5px; vertical-align: 0; }
.sw.cancelled { background: repeating-linear-gradient(45deg, #e16f24 0 3px, #f2b48a 3px 5px); }
.sw.critical { background: #fff; border: 2px solid #0a3069; }
.sw.retry { width: 3px; background: #1f2328; }
.note { background: #fff8c5; border: 1px solid #d4a72c66; border-radius: 6px; padding: 6px 10px; }
svg.timeline { display: block; width: 100%; height: auto; }
svg.timeline text { font-size: 12px; fill: #1f2328; font-family: system-ui, "DejaVu Sans", "Liberation Sans", sans-serif; }
svg.timeline text.label { font-family: "DejaVu Sans Mono", "Liberation Mono", ui-monospace, monospace; font-size: 11.5px; }
svg.timeline text.crit { font-weight: 700; }
svg.timeline text.dim, svg.timeline text.tick { fill: #59636e; font-size: 11px; }
svg.timeline text.wave { font-weight: 600; fill: #59636e; font-size: 11.5px; }
svg.timeline text.inside { fill: #fff; }
table { border-collapse: collapse; width: 100%; font-size: 13px; }
th, td { text-align: left; padding: 4px 8px; border-bottom: 1px solid #eaeef2; vertical-align: top; }
th { color: #59636e; font-weight: 600; }
td.wide { width: 45%; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.st { font-weight: 600; white-space: nowrap; }
.st.succeeded { color: #1a7f37; } .st.failed { color: #cf222e; } .st.cancelled { color: #bc4c00; }
.st.skipped { color: #59636e; } .st.blocked { color: #8250df; } .st.unknown { color: #59636e; }
.st.denied { color: #a40e26; } .st.awaiting { color: #9a6700; }
pre.tail { background: #0d1117; color: #e6edf3; padding: 10px 12px; border-radius: 6px; margin: 6px 0 0; line-height: 1.4; white-space: pre-wrap; overflow-wrap: anywhere; }
p.msg { white-space: pre-wrap; margin: 4px 0; }
footer { color: #59636e; font-size: 12px; margin-top: 18px; }
"#;

/// The colour of a project that ended as `kind`.
pub(super) fn colour(kind: &str) -> &'static str {
    match kind {
        "succeeded" => SUCCEEDED,
        "failed" => FAILED,
        "cancelled" => CANCELLED,
        "skipped" => SKIPPED,
        "blocked" => BLOCKED,
        "denied" => DENIED,
        "awaiting" => AWAITING,
        _ => UNKNOWN,
    }
}
