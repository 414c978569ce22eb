//! How the timeline's numbers read: change counts, offsets from the start of the run.

/// `+2 ~1 -1 +-1` for a preview's change counts (other kinds by name).
pub fn changes_text(changes: &[(String, u64)]) -> String {
    changes
        .iter()
        .map(|(k, n)| match k.as_str() {
            "create" => format!("+{n}"),
            "update" => format!("~{n}"),
            "delete" => format!("-{n}"),
            "replace" => format!("+-{n}"),
            other => format!("{other} {n}"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A duration from the start of the run: `+0.35s`, `+1m05s`.
pub fn offset_text(ms: u64) -> String {
    if ms < 60_000 {
        format!("+{:.2}s", ms as f64 / 1000.0)
    } else {
        format!("+{}m{:02}s", ms / 60_000, (ms % 60_000) / 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_counts_read_as_signs() {
        let counts = [("create".into(), 2), ("update".into(), 1)];
        assert_eq!(changes_text(&counts), "+2 ~1");
        assert_eq!(changes_text(&[("replace".into(), 1)]), "+-1");
    }

    #[test]
    fn offsets_read_well() {
        assert_eq!(offset_text(0), "+0.00s");
        assert_eq!(offset_text(1234), "+1.23s");
        assert_eq!(offset_text(65_000), "+1m05s");
    }
}
