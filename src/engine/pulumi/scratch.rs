//! A throwaway project folder for `pulumi stack init`. `stack init` takes no
//! `--config-file`: it writes the new stack's secrets provider (a passphrase salt) into
//! the project's own `Pulumi.<stack>.yaml`, a file the user commits. strata runs it in a
//! private copy of the project instead (its name and runtime, and the stack config the
//! run will give Pulumi), then carries what Pulumi wrote there into that config: the
//! stack is the same one in the backend, and no file of the user's is touched.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::engine::Job;
use crate::workspace::StackConfig;

/// The copy, removed when dropped.
pub(super) struct Scratch {
    dir: tempfile::TempDir,
    stack_file: PathBuf,
}

impl Scratch {
    /// A copy of the job's project for `stack init`: its `Pulumi.yaml` reduced to its
    /// name and runtime, and the job's stack config as `Pulumi.<stack>.yaml`.
    pub(super) fn new(job: &Job) -> Result<Scratch, String> {
        crate::files::private_dir(&job.scratch_dir).map_err(|e| e.message)?;
        let dir = tempfile::Builder::new()
            .prefix("stack-init-")
            .tempdir_in(&job.scratch_dir)
            .map_err(|e| {
                format!(
                    "could not make a folder in {}: {e}",
                    job.scratch_dir.display()
                )
            })?;
        let project = format!(
            "name: {}\nruntime: {}\n",
            serde_json::to_string(&job.name).unwrap_or_default(),
            serde_json::to_string(&runtime_of(&job.dir)).unwrap_or_default()
        );
        write(&dir.path().join("Pulumi.yaml"), project.as_bytes())?;
        let short = job.stack.rsplit('/').next().unwrap_or(&job.stack);
        let stack_file = dir.path().join(format!("Pulumi.{short}.yaml"));
        if let Ok(text) = std::fs::read(&job.config_file) {
            write(&stack_file, &text)?;
        }
        Ok(Scratch { dir, stack_file })
    }

    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The environment of the call in the copy: a relative passphrase file is taken from
    /// the project's folder, where Pulumi would read it.
    pub(super) fn env(&self, job: &Job) -> BTreeMap<String, String> {
        let mut env = job.env.clone();
        if let Some(f) = env.get_mut("PULUMI_CONFIG_PASSPHRASE_FILE")
            && !f.is_empty()
            && Path::new(f.as_str()).is_relative()
        {
            *f = job.dir.join(&*f).display().to_string();
        }
        env
    }

    /// Carries the secrets provider `stack init` wrote in the copy into the job's config.
    pub(super) fn carry_provider(&self, job: &Job) -> Result<(), String> {
        let Some(written) = StackConfig::load_project(&self.stack_file).map_err(|e| e.message)?
        else {
            return Ok(());
        };
        if !written.names_secrets_provider() {
            return Ok(());
        }
        let mut cfg = StackConfig::load_project(&job.config_file)
            .map_err(|e| e.message)?
            .unwrap_or_else(|| StackConfig::new(&job.config_file));
        cfg.take_secrets_provider(&written);
        cfg.save_to(&job.config_file).map_err(|e| e.message)
    }
}

/// The `runtime:` name of the project in `dir` (`yaml` when it cannot be read: `stack
/// init` runs no program).
fn runtime_of(dir: &Path) -> String {
    ["Pulumi.yaml", "Pulumi.yml"]
        .iter()
        .find_map(|f| crate::workspace::project::read_pulumi_yaml(&dir.join(f)).ok())
        .map(|m| m.runtime)
        .filter(|r| !r.is_empty())
        .unwrap_or_else(|| "yaml".to_string())
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    crate::files::write_atomic(path, bytes, Some(0o600)).map_err(|e| e.message)
}
