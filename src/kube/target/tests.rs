use super::*;

fn kubeconfig(contexts: &[(&str, &str)]) -> String {
    let mut clusters = String::new();
    let mut ctxs = String::new();
    for (name, server) in contexts {
        clusters.push_str(&format!(
            "- name: {name}\n  cluster:\n    server: {server}\n"
        ));
        ctxs.push_str(&format!(
            "- name: {name}\n  context:\n    cluster: {name}\n    user: u\n"
        ));
    }
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n{clusters}users:\n- name: u\n  user:\n    token: t\ncontexts:\n{ctxs}current-context: {}\n",
        contexts[0].0
    )
}

struct Fixture {
    dir: tempfile::TempDir,
    config: BTreeMap<String, String>,
    env: BTreeMap<String, String>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        Fixture {
            dir,
            config: BTreeMap::new(),
            env: BTreeMap::new(),
        }
    }
    fn file(&self, name: &str, text: &str) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p
    }
    fn state(&self) -> PathBuf {
        self.dir.path().join("state")
    }
    fn at<T>(&self, f: impl FnOnce(&Lookup) -> T) -> T {
        let state = self.state();
        f(&Lookup {
            stack: "dev",
            root: self.dir.path(),
            state_dir: &state,
            config: &self.config,
            env: &self.env,
        })
    }
    fn hook(&self) -> Result<ClusterTarget, String> {
        self.at(|at| from_hook("infra/cluster", at))
    }
    fn profile(&self, kubeconfig: &str, context: Option<&str>) -> Result<ClusterTarget, String> {
        self.at(|at| from_profile(kubeconfig, context, at))
    }
}

#[test]
fn the_hooks_cluster_is_used_whatever_the_current_context() {
    let f = Fixture::new();
    let kc = f.file("config", &kubeconfig(&[("dev-c", "https://dev:6443")]));
    remember(&f.state(), "infra/cluster", &kc, "dev-c").unwrap();
    // The user switches to another context meanwhile.
    let text = kubeconfig(&[("prod", "https://prod:6443"), ("dev-c", "https://dev:6443")]);
    std::fs::write(&kc, text).unwrap();
    let t = f.hook().unwrap();
    assert_eq!(t.context, "dev-c");
    assert_eq!(t.server, "https://dev:6443");
}

#[test]
fn a_cluster_the_hook_never_merged_here_is_unknown() {
    let f = Fixture::new();
    let err = f.hook().unwrap_err();
    assert!(err.contains("not known on this machine"), "{err}");
    assert!(
        err.contains("strata up -s dev --project infra/cluster"),
        "{err}"
    );
    // Remembered for another project: as unknown.
    let kc = f.file("config", &kubeconfig(&[("x", "https://x")]));
    remember(&f.state(), "infra/other", &kc, "x").unwrap();
    assert!(f.hook().is_err());
}

#[test]
fn a_context_that_moved_or_vanished_is_refused() {
    let f = Fixture::new();
    let kc = f.file("config", &kubeconfig(&[("shared", "https://dev:6443")]));
    remember(&f.state(), "infra/cluster", &kc, "shared").unwrap();
    std::fs::write(&kc, kubeconfig(&[("shared", "https://prod:6443")])).unwrap();
    let err = f.hook().unwrap_err();
    assert!(err.contains("now points at https://prod:6443"), "{err}");
    assert!(err.contains("https://dev:6443"), "{err}");
    std::fs::write(&kc, kubeconfig(&[("other", "https://dev:6443")])).unwrap();
    let err = f.hook().unwrap_err();
    assert!(err.contains("no context `shared`"), "{err}");
}

#[test]
fn the_profiles_cluster_fills_config_and_env() {
    let mut f = Fixture::new();
    let kc = f.file(
        "stack.kubeconfig",
        &kubeconfig(&[("a", "https://a"), ("b", "https://b")]),
    );
    f.config
        .insert("kubeconfig:kubeconfig".into(), "stack.kubeconfig".into());
    f.config.insert("kubeconfig:context".into(), "b".into());
    let (file, context) = (
        "${config.kubeconfig:kubeconfig}",
        Some("${config.kubeconfig:context}"),
    );
    let t = f.profile(file, context).unwrap();
    assert_eq!(
        (t.kubeconfig.as_path(), t.context.as_str()),
        (kc.as_path(), "b")
    );
    assert_eq!(t.server, "https://b");

    // An empty context: only a file with one context is unambiguous.
    f.config.insert("kubeconfig:context".into(), String::new());
    let err = f.profile(file, context).unwrap_err();
    assert!(err.contains("2 contexts (a, b)"), "{err}");
    std::fs::write(&kc, kubeconfig(&[("only", "https://only")])).unwrap();
    let t = f.profile(file, context).unwrap();
    assert_eq!(t.context, "only");

    // A key the stack lacks, an env variable, a placeholder of another kind.
    f.config.remove("kubeconfig:kubeconfig");
    let err = f.profile(file, context).unwrap_err();
    assert!(err.contains("config `kubeconfig:kubeconfig`"), "{err}");
    f.env
        .insert("HOME".into(), f.dir.path().display().to_string());
    assert_eq!(
        f.profile("~/stack.kubeconfig", None).unwrap().server,
        "https://only"
    );
    let err = f.profile("${outputs.kubeconfig}", None).unwrap_err();
    assert!(err.contains("only ${config.KEY} and ${env.NAME}"), "{err}");
}

#[test]
fn pruning_reads_only_the_same_clusters_namespaces() {
    let target = ClusterTarget {
        kubeconfig: "/k".into(),
        context: "dev".into(),
        server: "https://dev".into(),
    };
    let same = serde_json::to_string(&Written {
        server: "https://dev".into(),
        context: "dev".into(),
        namespaces: vec!["apps".into()],
    })
    .unwrap();
    assert_eq!(
        Written::previous(Some(&same), &target),
        (vec!["apps".to_string()], None)
    );
    let other = same.replace("https://dev", "https://prod");
    let (ns, note) = Written::previous(Some(&other), &target);
    assert!(ns.is_empty());
    assert!(note.unwrap().contains("https://prod"));
    // The bare list of older versions does not say which cluster: nothing is pruned.
    let (ns, note) = Written::previous(Some(r#"["apps"]"#), &target);
    assert!(ns.is_empty() && note.is_some());
    assert_eq!(Written::previous(None, &target), (Vec::new(), None));
}
