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
        // Probed until it first accepts, then never again: nothing on the measured core.
        assert_eq!(get(c, "startupProbe.tcpSocket.port").as_str(), Some("http"));
        for probe in ["readinessProbe", "livenessProbe"] {
            assert!(
                get(c, probe).is_null(),
                "{file}: a {probe} would keep probing"
            );
        }
        // Headless: the driver reaches the pod's own address, no kube-proxy NAT.
        assert_eq!(s(service, "spec.clusterIP"), "None", "{file}");
        // The Service selects this Deployment's pods.
        let selector = s(service, "spec.selector.app");
        assert_eq!(selector, s(deploy, "spec.template.metadata.labels.app"));
        assert_eq!(get(service, "spec.ports.0.port").as_u64(), Some(3000));
        services.push(s(service, "metadata.name").to_string());
    }
    // The driver Job loads each server at each level, one after another (init containers).
    let job = &docs("driver/driver-job.yaml")[0];
    assert_eq!(s(job, "kind"), "Job");
    let pod = get(job, "spec.template.spec");
    assert_eq!(s(pod, "nodeSelector.rxbench/role"), "driver");
    let targets: Vec<(String, String)> = get(pod, "initContainers")
        .as_sequence()
        .unwrap()
        .iter()
        .map(|c| {
            assert_eq!(s(c, "image"), "rxbench-rxload:latest");
            let args: Vec<&str> = get(c, "args")
                .as_sequence()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap())
                .collect();
            let conns = args.iter().find(|a| a.starts_with("-c")).unwrap();
            (args.last().unwrap().to_string(), conns.to_string())
        })
        .collect();
    for svc in &services {
        for conns in ["-c64", "-c256", "-c512"] {
            assert!(
                targets.contains(&(format!("http://{svc}:3000/"), conns.to_string())),
                "{svc} is never loaded at {conns}: {targets:?}"
            );
        }
    }
    assert_eq!(targets.len(), 9, "{targets:?}");
    assert!(
        get(job, "spec.activeDeadlineSeconds").as_u64().is_some(),
        "the Job stops by itself"
    );
}

/// The resources a kustomization lists, and the YAML files beside it (every one must be listed).
fn listed_and_present(folder: &Path) -> (Vec<String>, Vec<String>) {
    let text = std::fs::read_to_string(folder.join("kustomization.yaml")).unwrap();
    let k: Value = serde_norway::from_str(&text).unwrap();
    let listed: Vec<String> = get(&k, "resources")
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(folder)
        .unwrap()
        .flatten()
        .filter(|e| e.path().is_file())
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|f| f.ends_with(".yaml") && f != "kustomization.yaml")
        .collect();
    files.sort();
    (listed, files)
}

#[test]
fn the_servers_and_the_driver_are_two_kustomizations_that_build() {
    // The servers first (with their namespace); the Job on its own, applied once they are
    // available: created with them it could start before they answer and fail for good.
    let (listed, files) = listed_and_present(&dir());
    let mut sorted = listed.clone();
    sorted.sort();
    assert_eq!(sorted, files);
    assert_eq!(listed[0], "namespace.yaml");
    assert!(!listed.iter().any(|f| f.contains("driver")), "{listed:?}");
    let (listed, files) = listed_and_present(&dir().join("driver"));
    assert_eq!(
        (listed.as_slice(), files.as_slice()),
        (
            &["driver-job.yaml".to_string()][..],
            &["driver-job.yaml".to_string()][..]
        )
    );
    let page = std::fs::read_to_string(dir().join("../../docs/kubernetes.md")).unwrap();
    let page = &page[page.find("## Running it").expect("a Running it section")..];
    let order = [
        "kubectl apply -k deploy/k8s\n",
        "--for=condition=available",
        "kubectl apply -k deploy/k8s/driver",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|o| {
            page.find(o)
                .unwrap_or_else(|| panic!("docs/kubernetes.md lacks {o:?}"))
        })
        .collect();
    assert!(
        at.windows(2).all(|w| w[0] < w[1]),
        "the page applies them out of order"
    );
    for (folder, deployments) in [(dir(), 3), (dir().join("driver"), 0)] {
        match std::process::Command::new("kubectl")
            .arg("kustomize")
            .arg(&folder)
            .output()
        {
            Ok(out) => {
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let text = String::from_utf8_lossy(&out.stdout);
                assert_eq!(
                    text.matches("kind: Deployment").count(),
                    deployments,
                    "{text}"
                );
            }
            Err(_) => {
                let line = "SKIPPED kubectl kustomize: kubectl is not installed (the manifests were still parsed)\n";
                let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            }
        }
    }
}

#[test]
fn the_namespace_admits_the_unconfined_server_and_warns_against_baseline() {
    let ns = &docs("namespace.yaml")[0];
    // The keys hold dots: indexed directly, not through `get`'s dotted paths.
    let label = |l: &str| {
        ns["metadata"]["labels"][format!("pod-security.kubernetes.io/{l}").as_str()]
            .as_str()
            .unwrap_or_else(|| panic!("no {l} label"))
            .to_string()
    };
    assert_eq!(
        label("enforce"),
        "privileged",
        "baseline forbids an Unconfined seccomp profile"
    );
    assert_eq!(
        (label("warn"), label("audit")),
        ("baseline".into(), "baseline".into())
    );
}

/// Every manifest against the Kubernetes schemas, strictly (an unknown field is an error):
/// `kubernetes-validate` from PyPI ships them, so this runs offline. .ci/run installs it and
/// sets RXBENCH_REQUIRE_KUBERNETES_VALIDATE, so there it cannot skip.
#[test]
fn every_manifest_validates_against_the_kubernetes_schemas() {
    let mut files = vec![];
    for folder in [dir(), dir().join("driver")] {
        for e in std::fs::read_dir(&folder).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".yaml") && name != "kustomization.yaml" {
                files.push(e.path());
            }
        }
    }
    files.sort();
    assert_eq!(files.len(), 5, "{files:?}");
    let out = std::process::Command::new("kubernetes-validate")
        .args(["--strict", "--kubernetes-version", "1.31"])
        .args(&files)
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            assert!(
                std::env::var_os("RXBENCH_REQUIRE_KUBERNETES_VALIDATE").is_none(),
                "RXBENCH_REQUIRE_KUBERNETES_VALIDATE is set but kubernetes-validate cannot run: {e}"
            );
            let line = "SKIPPED every_manifest_validates_against_the_kubernetes_schemas: kubernetes-validate is not installed (pip install kubernetes-validate)\n";
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return;
        }
    };
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{said}");
    // One line a document: the namespace, three Deployments with their Services, the Job.
    assert_eq!(said.matches(" passed for resource ").count(), 8, "{said}");
    assert!(!said.contains("WARN") && !said.contains("ERROR"), "{said}");
    for f in &files {
        assert!(
            said.contains(&*f.to_string_lossy()),
            "{f:?} not validated: {said}"
        );
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
