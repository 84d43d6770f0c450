//! deploy/k8s: the manifests parse and say what docs/kubernetes.md promises — one server
//! Deployment per seccomp profile (RuntimeDefault, Unconfined, Localhost with the project's
//! no-io-uring profile), Guaranteed QoS with a whole CPU for the static CPU manager, locked-down
//! containers, a driver Job that loads each server's Service in turn. No cluster was available
//! to run them; `kubectl kustomize` builds them where kubectl is installed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_norway::Value;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .join("deploy/k8s")
}

/// Every document of `file`.
fn docs(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    serde_norway::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).unwrap_or_else(|e| panic!("{file}: {e}")))
        .collect()
}

fn get<'a>(v: &'a Value, path: &str) -> &'a Value {
    path.split('.')
        .fold(v, |v, key| match key.parse::<usize>() {
            Ok(i) => &v[i],
            Err(_) => &v[key],
        })
}

fn s<'a>(v: &'a Value, path: &str) -> &'a str {
    get(v, path)
        .as_str()
        .unwrap_or_else(|| panic!("{path} is not a string in {v:?}"))
}

#[test]
fn one_locked_down_server_per_seccomp_profile() {
    let mut services = Vec::new();
    for (file, name, profile) in [
        (
            "server-runtime-default.yaml",
            "rxbench-runtime-default",
            "RuntimeDefault",
        ),
        ("server-unconfined.yaml", "rxbench-unconfined", "Unconfined"),
        (
            "server-no-io-uring.yaml",
            "rxbench-no-io-uring",
            "Localhost",
        ),
    ] {
        let d = docs(file);
        let deploy = d
            .iter()
            .find(|x| s(x, "kind") == "Deployment")
            .expect("a Deployment");
        let service = d
            .iter()
            .find(|x| s(x, "kind") == "Service")
            .expect("a Service");
        assert_eq!(s(deploy, "metadata.name"), name);
        assert_eq!(s(deploy, "metadata.namespace"), "rxbench");
        let pod = get(deploy, "spec.template.spec");
        assert_eq!(
            s(pod, "securityContext.seccompProfile.type"),
            profile,
            "{file}"
        );
        if profile == "Localhost" {
            assert_eq!(
                s(pod, "securityContext.seccompProfile.localhostProfile"),
                "profiles/rxbench-no-io-uring.json"
            );
        }
        assert_eq!(
            get(pod, "securityContext.runAsNonRoot").as_bool(),
            Some(true)
        );
        assert_eq!(s(pod, "nodeSelector.rxbench/role"), "server");
        let c = get(pod, "containers.0");
        assert_eq!(s(c, "image"), "rxbench-server:latest");
        // Guaranteed QoS with an integer CPU: the static CPU manager gives it a core of its own.
        assert_eq!(
            get(c, "resources.requests"),
            get(c, "resources.limits"),
            "{file}"
        );
        assert_eq!(s(c, "resources.limits.cpu"), "1");
        let env: BTreeMap<&str, &str> = get(c, "env")
            .as_sequence()
            .unwrap()
            .iter()
            .map(|e| (s(e, "name"), s(e, "value")))
            .collect();
        assert_eq!(
            env.get("APP_WORKERS"),
            Some(&"1"),
            "one worker on its one core"
        );
        assert_eq!(
            get(c, "securityContext.readOnlyRootFilesystem").as_bool(),
            Some(true)
        );
        assert_eq!(
            get(c, "securityContext.allowPrivilegeEscalation").as_bool(),
            Some(false)
        );
        assert_eq!(s(c, "securityContext.capabilities.drop.0"), "ALL");
        // The Service selects this Deployment's pods.
        let selector = s(service, "spec.selector.app");
        assert_eq!(selector, s(deploy, "spec.template.metadata.labels.app"));
        assert_eq!(get(service, "spec.ports.0.port").as_u64(), Some(3000));
        services.push(s(service, "metadata.name").to_string());
    }
    // The driver Job loads each server's Service, one after another (init containers).
    let job = &docs("driver-job.yaml")[0];
    assert_eq!(s(job, "kind"), "Job");
    let pod = get(job, "spec.template.spec");
    assert_eq!(s(pod, "nodeSelector.rxbench/role"), "driver");
    let targets: Vec<String> = get(pod, "initContainers")
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(s(c, "image"), "rxbench-rxload:latest");
            let args = get(c, "args").as_sequence().unwrap();
            args.last().unwrap().as_str().unwrap().to_string()
        })
        .collect();
    for svc in &services {
        assert!(
            targets.contains(&format!("http://{svc}:3000/")),
            "{svc} is never loaded: {targets:?}"
        );
    }
    assert!(
        get(job, "spec.activeDeadlineSeconds").as_u64().is_some(),
        "the Job stops by itself"
    );
}

#[test]
fn the_kustomization_lists_every_manifest_and_builds() {
    let k = &docs("kustomization.yaml")[0];
    let listed: Vec<&str> = get(k, "resources")
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|f| f.ends_with(".yaml") && f != "kustomization.yaml")
        .collect();
    files.sort();
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, files);
    // The namespace first, so that `kubectl apply -k` can create the rest inside it.
    assert_eq!(listed[0], "namespace.yaml");
    match std::process::Command::new("kubectl")
        .arg("kustomize")
        .arg(dir())
        .output()
    {
        Ok(out) => {
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let text = String::from_utf8_lossy(&out.stdout);
            assert_eq!(text.matches("kind: Deployment").count(), 3, "{text}");
        }
        Err(_) => {
            let line = "SKIPPED kubectl kustomize: kubectl is not installed (the manifests were still parsed)\n";
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        }
    }
}

#[test]
fn the_localhost_profile_is_the_project_s_no_io_uring_profile() {
    // docs/kubernetes.md copies docker/seccomp/no-io-uring.json to each server node as
    // /var/lib/kubelet/seccomp/profiles/rxbench-no-io-uring.json.
    let root = dir().parent().unwrap().parent().unwrap().to_path_buf();
    let doc = std::fs::read_to_string(root.join("docs/kubernetes.md")).unwrap();
    assert!(
        doc.contains("docker/seccomp/no-io-uring.json")
            && doc.contains("/var/lib/kubelet/seccomp/profiles/rxbench-no-io-uring.json")
    );
    let profile: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("docker/seccomp/no-io-uring.json")).unwrap(),
    )
    .unwrap();
    let denied = profile["syscalls"][0]["names"].as_array().unwrap();
    assert_eq!(denied.len(), 3);
    assert_eq!(
        profile["syscalls"][0]["errnoRet"], 1,
        "EPERM, as Docker >= 25 and containerd >= 2 do"
    );
}
