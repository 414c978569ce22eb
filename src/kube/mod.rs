//! Talking to Kubernetes: the kubeconfig file (the `kubeconfig` hook merges into it) and
//! the cluster (the built-in secrets step writes Kubernetes Secrets into it), and which
//! cluster is a stack's (`target`).

pub mod kubeconfig;
pub mod secrets;
pub mod target;
