//! The verdict of a profile's `policy:` rules on one project's planned changes: the
//! first rule that denies them (a `deny:` kind, more than `max_changes:`), else the first
//! that holds them for an approval (an `approve:` kind), each with why and the resources
//! it names. (Taking a project's preview to these rules is `run::step::rules`.)

use std::sync::Arc;

use super::denial::Denial;
use crate::engine::digest::{self, CHANGING, Changes};
use crate::util::plural;
use crate::workspace::profile::{ChangeKind, Rule};

/// The denial of a project rules hold whose preview's changes could not be read (a
/// wrapper around the CLI that printed something else than its JSON): refused, since
/// what cannot be read cannot be let go.
pub fn unread(rules: &[Arc<Rule>], project: &str) -> Denial {
    Denial {
        rule: rules
            .iter()
            .map(|r| r.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        reason: format!(
            "the preview's output of {project} could not be read, so its changes are unknown and are not let through; check that `pulumi preview --json` prints its JSON document on stdout (a wrapper script must not swallow or mangle it)"
        ),
        resources: Vec::new(),
    }
}

/// A preview's findings: the rule that would deny its changes (or, with rules and
/// changes that could not be read, [`unread`]), else the one that would hold them for
/// an approval, each said after `message` too.
pub fn foresee(
    rules: &[Arc<Rule>],
    project: &str,
    changes: Option<&Changes>,
    message: &mut String,
) -> (Option<Box<Denial>>, Option<Box<Denial>>) {
    let Some(changes) = changes else {
        if rules.is_empty() {
            return (None, None);
        }
        let d = unread(rules, project);
        message.push_str(&format!(" · {}", d.describe()));
        return (Some(Box::new(d)), None);
    };
    if let Some(d) = judge(rules, changes) {
        message.push_str(&format!(" · {}", d.describe()));
        return (Some(Box::new(d)), None);
    }
    let held = holds(rules, changes);
    if let Some(h) = &held {
        message.push_str(&format!(" · would be {}", h.describe_hold()));
    }
    (None, held.map(Box::new))
}

/// The most resources a denial names; the count says the rest.
const NAMED: usize = 20;

/// The first of `rules` that denies `changes`, or `None` when every rule lets them go.
pub fn judge(rules: &[Arc<Rule>], changes: &Changes) -> Option<Denial> {
    rules.iter().find_map(|r| denies(r, changes))
}

/// The first of `rules` that holds `changes` for an approval (a change of an `approve:`
/// kind), or `None`.
pub fn holds(rules: &[Arc<Rule>], changes: &Changes) -> Option<Denial> {
    rules.iter().find_map(|r| of_kinds(r, &r.approve, changes))
}

fn denies(rule: &Rule, changes: &Changes) -> Option<Denial> {
    if let Some(d) = of_kinds(rule, &rule.deny, changes) {
        return Some(d);
    }
    let total: u64 = CHANGING.iter().map(|k| changes.count(k)).sum();
    match rule.max_changes {
        Some(max) if total > max => Some(Denial {
            rule: rule.name.clone(),
            reason: format!(
                "would make {total} change{}, more than {max}",
                plural(total)
            ),
            resources: named(changes, |op| CHANGING.contains(&op)),
        }),
        _ => None,
    }
}

/// `rule`'s finding when `changes` hold a change of one of `kinds`.
fn of_kinds(rule: &Rule, kinds: &[ChangeKind], changes: &Changes) -> Option<Denial> {
    let kinds: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    let counted: Vec<(&str, u64)> = kinds
        .iter()
        .map(|k| (*k, changes.count(k)))
        .filter(|(_, n)| *n > 0)
        .collect();
    if !counted.is_empty() {
        let reason = counted
            .iter()
            .map(|(k, n)| match *k {
                super::contracts::KIND => {
                    format!("would break {n} read{} of its outputs", plural(*n))
                }
                k => format!("would {k} {n} resource{}", plural(*n)),
            })
            .collect::<Vec<_>>()
            .join(", ");
        return Some(Denial {
            rule: rule.name.clone(),
            reason,
            resources: named(changes, |op| kinds.contains(&op)),
        });
    }
    None
}

/// The changed resources whose operation `pick` takes, as `delete aws:… name`.
fn named(changes: &Changes, pick: impl Fn(&str) -> bool) -> Vec<String> {
    let all: Vec<String> = changes
        .steps
        .iter()
        .filter(|(op, _)| pick(op))
        .map(|(op, urn)| match op.as_str() {
            // Its "URN" is the broken read, said for people.
            super::contracts::KIND => urn.clone(),
            op => format!("{op} {}", digest::short_urn(urn)),
        })
        .collect();
    if all.len() <= NAMED {
        return all;
    }
    let mut some = all[..NAMED].to_vec();
    some.push(format!("and {} more", all.len() - NAMED));
    some
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(name: &str, deny: &[ChangeKind], max: Option<u64>) -> Arc<Rule> {
        Arc::new(Rule {
            name: name.into(),
            select: None,
            deny: deny.to_vec(),
            approve: vec![],
            max_changes: max,
        })
    }

    fn changes(steps: &[(&str, &str)]) -> Changes {
        let mut c = Changes::default();
        for (op, name) in steps {
            *c.counts.entry(op.to_string()).or_default() += 1;
            c.steps.push((
                op.to_string(),
                format!("urn:pulumi:dev::db::aws:rds/instance:Instance::{name}"),
            ));
        }
        c.counts.insert("same".into(), 9);
        c
    }

    #[test]
    fn a_denied_kind_is_named_with_its_resources() {
        let rules = [
            rule(
                "keep-data",
                &[ChangeKind::Delete, ChangeKind::Replace],
                None,
            ),
            rule("small", &[], Some(1)),
        ];
        let d = judge(&rules, &changes(&[("update", "a"), ("delete", "main")])).unwrap();
        assert_eq!(d.rule, "keep-data");
        assert_eq!(d.reason, "would delete 1 resource");
        assert_eq!(d.resources, ["delete aws:rds/instance:Instance main"]);
        assert_eq!(
            d.describe(),
            "denied by keep-data: would delete 1 resource (delete aws:rds/instance:Instance main)"
        );
    }

    #[test]
    fn too_many_changes_are_denied_and_few_go() {
        let rules = [rule("small", &[], Some(2))];
        let two = changes(&[("create", "a"), ("update", "b")]);
        assert_eq!(judge(&rules, &two), None, "`same` is no change");
        let three = changes(&[("create", "a"), ("update", "b"), ("replace", "c")]);
        let d = judge(&rules, &three).unwrap();
        assert_eq!(d.reason, "would make 3 changes, more than 2");
        assert_eq!(d.resources.len(), 3);
        assert_eq!(
            judge(
                &[rule("no-create", &[ChangeKind::Create], None)],
                &changes(&[("update", "x")])
            ),
            None
        );
    }

    #[test]
    fn an_approve_kind_holds_and_other_kinds_go() {
        let mut r = (*rule("review", &[], None)).clone();
        r.approve = vec![ChangeKind::Update, ChangeKind::Delete];
        let rules = [Arc::new(r)];
        assert_eq!(
            judge(&rules, &changes(&[("update", "a")])),
            None,
            "not a denial"
        );
        let h = holds(&rules, &changes(&[("create", "n"), ("update", "a")])).unwrap();
        assert_eq!(h.rule, "review");
        assert_eq!(h.reason, "would update 1 resource");
        assert_eq!(h.resources, ["update aws:rds/instance:Instance a"]);
        assert!(h.describe_hold().starts_with("held by review: "), "{h:?}");
        assert_eq!(holds(&rules, &changes(&[("create", "n")])), None);
    }

    #[test]
    fn a_long_list_names_twenty_and_counts_the_rest() {
        let names: Vec<String> = (0..25).map(|i| format!("r{i}")).collect();
        let steps: Vec<(&str, &str)> = names.iter().map(|n| ("delete", n.as_str())).collect();
        let d = judge(&[rule("k", &[ChangeKind::Delete], None)], &changes(&steps)).unwrap();
        assert_eq!(d.resources.len(), 21);
        assert_eq!(d.resources[20], "and 5 more");
        assert_eq!(d.reason, "would delete 25 resources");
    }
}
