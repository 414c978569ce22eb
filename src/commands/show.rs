//! `strata show`: the execution order (of what `--filter` selects) as a tree, DOT,
//! Mermaid or JSON. Needs no stack config and prompts for nothing.

use crate::cli::{ShowArgs, ShowFormat};
use crate::error::Result;
use crate::plan::render;
use crate::plan::select::Selector;
use crate::workspace::Target;

pub fn run(target: &Target, args: &ShowArgs, sel: &Selector, json: bool) -> Result<i32> {
    let loaded = super::load(target, false)?;
    let (plan, empty_because) = super::selected(&loaded, sel)?;
    if let Some(why) = empty_because {
        eprintln!("{why}");
    }
    let shared = loaded
        .stack
        .as_deref()
        .map(|s| loaded.ws.stack_config_path(s));
    let at = crate::plan::references::Context {
        root: &loaded.ws.root,
        stack: loaded.stack.as_deref(),
        shared: shared.as_deref(),
    };
    let found = crate::plan::references::of_plan(&loaded.plan, &at);
    let unreadable = from_root(&loaded, crate::plan::references::unreadable(&found));
    let (backends, backend_why) = loaded.shown_backends();
    let header = render::Header {
        provider: &loaded.profile.name,
        infra_type: &loaded.profile.infra_type,
        stack: loaded.stack.as_deref(),
        secret_keys: loaded
            .profile
            .all_secrets()
            .iter()
            .map(|(s, _)| s.key.clone())
            .collect(),
        secret_name: &loaded.profile.secret_name,
        references: &crate::plan::references::targets(&found),
        unreadable: &unreadable,
        pools: &loaded.profile.pools,
        backends: &backends,
        backend_why: &backend_why,
    };
    let format = args.format.unwrap_or(if json {
        ShowFormat::Json
    } else {
        ShowFormat::Tree
    });
    let text = match format {
        ShowFormat::Tree => render::tree(&plan, &header),
        ShowFormat::Dot => render::dot(&plan, &header),
        ShowFormat::Mermaid => render::mermaid(&plan, &header),
        ShowFormat::Json => render::json(&plan, &header),
    };
    super::print(&text)?;
    Ok(0)
}

type ByPath = std::collections::BTreeMap<String, Vec<String>>;

/// `file:line` of each project's unreadable references, from the workspace root (as
/// `init` and `validate` print them), not from the project's folder.
fn from_root(loaded: &super::Loaded, by_project: ByPath) -> ByPath {
    by_project
        .into_iter()
        .map(|(path, ats)| {
            let dir = loaded
                .plan
                .node(&path)
                .and_then(|n| n.project.as_ref())
                .map(|p| {
                    p.dir
                        .strip_prefix(&loaded.ws.root)
                        .unwrap_or(&p.dir)
                        .to_path_buf()
                })
                .unwrap_or_default();
            let ats = ats
                .into_iter()
                .map(|at| dir.join(at).to_string_lossy().into_owned())
                .collect();
            (path, ats)
        })
        .collect()
}
