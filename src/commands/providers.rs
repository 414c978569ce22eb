//! `strata providers`: the profiles of the workspace, sorted, with descriptions.

use crate::error::Result;
use crate::settings::Settings;
use crate::workspace::Target;
use crate::workspace::profile;

pub fn run(target: &Target, settings: &Settings) -> Result<i32> {
    let ws = super::open_workspace(target)?;
    let list = profile::list(&ws.providers_dir())?;
    let mut rows = Vec::new();
    let mut broken = 0;
    for (name, file) in &list {
        match profile::describe(file) {
            Ok((description, infra_type)) => rows.push((name.clone(), infra_type, description)),
            Err(e) => {
                broken += 1;
                eprintln!("warning: {e}");
                rows.push((
                    name.clone(),
                    "?".into(),
                    "(invalid profile: see the warning above)".into(),
                ));
            }
        }
    }
    if settings.json {
        let v: Vec<serde_json::Value> = rows
            .iter()
            .map(|(n, t, d)| serde_json::json!({"name": n, "infra_type": t, "description": d}))
            .collect();
        return super::print(&format!("{}\n", serde_json::Value::Array(v))).map(|_| 0);
    }
    if rows.is_empty() {
        super::print(&format!(
            "no provider profiles in {}\n",
            crate::util::display_path(&ws.providers_dir())
        ))?;
        return Ok(0);
    }
    let w = rows.iter().map(|r| r.0.len()).max().unwrap_or(0);
    let wt = rows.iter().map(|r| r.1.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (n, t, d) in rows {
        out.push_str(&format!("{n:<w$}  {t:<wt$}  {d}\n"));
    }
    super::print(&out)?;
    Ok(if broken > 0 {
        crate::error::exit::CONFIG
    } else {
        0
    })
}
