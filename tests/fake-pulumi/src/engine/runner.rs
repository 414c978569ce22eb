//! One engine command's run: the preview pass, the real pass, and what their outcome
//! means (exit code, `--expect-no-changes`, `--save-plan`).

use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::time::Duration;

use super::pass::PassRun;
use super::{Op, Outcome, hook};
use crate::crypto::Crypter;
use crate::ctx::{Ctx, Stack};
use crate::display::{Display, Mode};
use crate::error::{Fail, Result, code};
use crate::plan::{Plan, Recorder};
use crate::program::{Program, STACK_TYPE};
use crate::signals;
use crate::state::{Resource, urn};

pub(super) struct Runner<'a> {
    pub(super) ctx: &'a Ctx,
    pub(super) st: &'a Stack,
    pub(super) op: Op,
    pub(super) key: String,
    pub(super) crypter: &'a Crypter,
    pub(super) salt: Option<String>,
    pub(super) config: &'a BTreeMap<String, Value>,
    pub(super) blinded: BTreeMap<String, String>,
    pub(super) program: &'a Program,
    pub(super) old: Vec<Resource>,
    /// Only the dry run (preview, or `--preview-only`).
    pub(super) dry_only: bool,
    /// `up --plan FILE`: every pass is constrained to it.
    pub(super) plan: Option<&'a Plan>,
    /// The stack config file's `config:` as written, for `preview --save-plan`.
    pub(super) plan_config: Map<String, Value>,
}

/// What one pass leaves behind.
pub(super) struct Pass {
    pub(super) outcome: Outcome,
    /// The stack's resources afterwards (meaningful when not a dry run).
    pub(super) resources: Vec<Resource>,
    pub(super) changed: bool,
    /// What the preview planned, when `--save-plan` asked for it.
    pub(super) recorded: Option<Recorder>,
}

impl Runner<'_> {
    pub(super) fn run_all(&self, skip_preview: bool) -> Result<()> {
        let streaming_preview = std::env::var("PULUMI_ENABLE_STREAMING_JSON_PREVIEW")
            .is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
        let json = self.ctx.json();
        let preview_mode = match (json, streaming_preview) {
            (false, _) => Mode::Human,
            (true, true) => Mode::Stream,
            (true, false) => Mode::Digest,
        };
        if self.dry_only || !skip_preview {
            let pass = self.pass(preview_mode, true)?;
            if pass.outcome != Outcome::Ok || self.dry_only {
                return self.conclude(pass, true);
            }
        }
        let mode = if json { Mode::Stream } else { Mode::Human };
        let pass = self.pass(mode, false)?;
        self.save(&pass)?;
        self.conclude(pass, false)
    }

    fn conclude(&self, pass: Pass, dry_run: bool) -> Result<()> {
        match pass.outcome {
            Outcome::Ok => {
                if self.ctx.args.bool("expect-no-changes") && pass.changed {
                    return Err(Fail::new(
                        7,
                        "no changes were expected but changes occurred",
                    ));
                }
                if let (Some(rec), Some(path)) = (pass.recorded, self.save_plan_path()) {
                    rec.write(
                        path,
                        self.plan_config.clone(),
                        self.crypter,
                        self.ctx.show_secrets(),
                    )?;
                    if !self.ctx.json() {
                        eprintln!(
                            "Update plan written to '{path}'\nRun `pulumi up --plan='{path}'` \
                             to constrain the update to the operations planned by this preview"
                        );
                    }
                }
                Ok(())
            }
            Outcome::Rejected => Err(Fail::bail(code::ERROR)),
            Outcome::Failed => {
                let code = std::env::var("FAKE_PULUMI_FAIL_CODE")
                    .ok()
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(code::ERROR);
                Err(Fail::bail(code))
            }
            Outcome::Cancelled => {
                let what = if dry_run { "preview" } else { self.op.kind() };
                Err(Fail::new(code::CANCELLED, format!("{what} canceled")))
            }
        }
    }

    /// `preview --save-plan FILE`.
    pub(super) fn save_plan_path(&self) -> Option<&str> {
        self.ctx
            .args
            .value("save-plan")
            .filter(|p| self.op == Op::Preview && !p.is_empty())
    }

    pub(super) fn failing(&self) -> bool {
        hook("FAIL", &self.key).is_some_and(|ops| {
            ops.split(',')
                .any(|o| o.trim() == self.op.hook_name() || o.trim() == "all")
        })
    }

    pub(super) fn delay(&self, dry_run: bool) -> Duration {
        if dry_run && !self.dry_only {
            return Duration::ZERO; // the preview before an update costs nothing
        }
        let ms = hook("DELAY_MS", &self.key)
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
        Duration::from_millis(ms)
    }

    fn pass(&self, mode: Mode, dry_run: bool) -> Result<Pass> {
        let project = &self.st.project.name;
        let stack = &self.st.name;
        let stack_urn = urn(stack, project, STACK_TYPE, &format!("{project}-{stack}"));
        let mut d = Display::new(
            mode,
            dry_run,
            &stack_urn,
            self.ctx.args.bool("suppress-outputs"),
        );
        d.banner(self.op.banner(dry_run), stack);
        d.prelude(self.blinded.clone());
        signals::enter_engine(dry_run);
        let mut run = PassRun {
            r: self,
            d,
            dry_run,
            slice: Duration::ZERO,
            stack_urn,
            check: self.plan.map(Plan::checker),
            record: (dry_run && self.save_plan_path().is_some()).then(Recorder::default),
        };
        let pass = match self.op {
            Op::Up | Op::Preview => run.update(),
            Op::Refresh => run.refresh(),
            Op::Destroy => run.destroy(),
        };
        signals::leave_engine();
        Ok(pass)
    }
}
