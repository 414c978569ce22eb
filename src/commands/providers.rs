//! `strata providers`: the profiles of the workspace, sorted, with descriptions.

use crate::cli::GlobalArgs;
use crate::error::Result;
use crate::settings::Settings;
use crate::workspace::profile;

pub fn run(g: &GlobalArgs, settings: &Settings) -> Result<i32> {
    let ws = super::open_workspace(g)?;
    let list = profile::list(&ws.providers_dir())?;
    let mut rows = Vec::new();
    for (name, file) in &list {
        let (description, infra_type) = profile::describe(file)?;
        rows.push((name.clone(), infra_type, description));
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
    Ok(0)
}
