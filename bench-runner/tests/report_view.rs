//! What a person sees: report.html in a real browser (headless Chromium, Debian's `chromium`),
//! at 1280×800. The answer — the headline — must be on the first screen, above the first table.
//! SKIPPED without chromium, unless RXBENCH_REQUIRE_CHROMIUM (.ci/run installs it and sets it).

use std::path::Path;
use std::process::Command;

fn chromium() -> Option<&'static str> {
    ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// The page with a script that writes where the headline and the first table landed into the
/// DOM, as Chromium laid them out in a 1280×800 window (`--dump-dom` prints the DOM after load).
fn layout(browser: &str, page: &Path) -> String {
    let html = std::fs::read_to_string(page).unwrap();
    let probe = r#"<script>
window.addEventListener('load', () => {
  const h = document.querySelector('h2');
  const list = h.nextElementSibling;
  const table = document.querySelector('table');
  const out = document.createElement('pre');
  out.id = 'layout';
  out.textContent = JSON.stringify({
    heading: h.textContent, heading_top: h.getBoundingClientRect().top,
    list_bottom: list.getBoundingClientRect().bottom,
    table_top: table ? table.getBoundingClientRect().top : null,
    viewport: window.innerHeight });
  document.body.appendChild(out);
});
</script>"#;
    let dir = std::env::temp_dir().join(format!("rxbench-view-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let probed = dir.join("report.html");
    std::fs::write(
        &probed,
        html.replacen("</body>", &format!("{probe}</body>"), 1),
    )
    .unwrap();
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--window-size=1280,800",
        ])
        .args(["--virtual-time-budget=2000", "--dump-dom"])
        .arg(format!("file://{}", probed.display()))
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let start = dom.find("<pre id=\"layout\">").unwrap_or_else(|| {
        panic!(
            "no layout in the DOM: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let rest = &dom[start + "<pre id=\"layout\">".len()..];
    rest[..rest.find("</pre>").unwrap()].replace("&quot;", "\"")
}

#[test]
fn the_headline_is_on_the_first_screen_above_the_first_table() {
    let Some(browser) = chromium() else {
        assert!(
            std::env::var_os("RXBENCH_REQUIRE_CHROMIUM").is_none(),
            "RXBENCH_REQUIRE_CHROMIUM is set but chromium is not installed"
        );
        let line = "SKIPPED the_headline_is_on_the_first_screen_above_the_first_table: chromium is not installed (apt-get install chromium)\n";
        let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
        return;
    };
    // The reference run, as the renderer writes it today (the re-render test keeps it so).
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../results/latest/report.html");
    let v: serde_json::Value = serde_json::from_str(&layout(browser, &page)).unwrap();
    assert_eq!(
        v["heading"], "What Docker's io_uring block costs here",
        "{v}"
    );
    let (list_bottom, viewport) = (
        v["list_bottom"].as_f64().unwrap(),
        v["viewport"].as_f64().unwrap(),
    );
    assert!(
        list_bottom <= viewport,
        "the headline ends below the first screen: {v}"
    );
    assert!(
        v["table_top"].as_f64().is_none_or(|t| t > list_bottom),
        "a table comes before the headline ends: {v}"
    );
}
