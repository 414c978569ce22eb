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
        unreadable: &crate::plan::references::unreadable(&found),
        pools: &loaded.profile.pools,
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
