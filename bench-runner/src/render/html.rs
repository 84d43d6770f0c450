//! report.html: one self-contained page a person opens in a browser — the table (table.md
//! rendered), the chart inlined, the evidence and the machine — with no file or network
//! fetch of its own.

use pulldown_cmark::{html, Options, Parser};

const STYLE: &str = "
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1300px; padding: 0 1em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ddd; } h3 { margin-top: 1.4em; }
table { border-collapse: collapse; margin: 0.6em 0 1.2em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 7px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; position: sticky; top: 0; }
tr:nth-child(even) td { background: #fafafa; }
code { background: #f3f3f3; padding: 0 3px; border-radius: 3px; }
figure { margin: 1.5em 0; } figure svg { max-width: 100%; height: auto; }
.evidence { overflow-x: auto; }
";

/// answer.svg's caption.
pub const ANSWER_CAPTION: &str = "the answer: what Docker's io_uring block costs the io_uring \
server and an epoll server here — each under no-io-uring against itself under relaxed, CPU \
per request, 95 % interval, over the grey band of what two identical servers differed by in \
that cell (filled: a result; hollow: not resolved, or no larger than the band)";

/// chart.svg's caption.
pub const CHART_CAPTION: &str = "the paired comparisons first (ratio and 95 % interval over \
the grey band the A/A control could resolve; dark: a result, the interval excludes 1), then CPU µs \
per request and req/s per profile (whiskers: 95 % interval of each median)";

/// A chart's caption, naming its load model.
pub fn chart_caption(load: crate::model::LoadModel) -> String {
    format!("{}: {CHART_CAPTION}", load.describe())
}
/// latency.svg's caption.
pub const LATENCY_CAPTION: &str = "open loop: latency from each request's due time against the \
offered load, as a share of each server's own keep-alive req/s (P99 thick, P50 thin; log axis)";

/// The mark in table.md where the page inlines its figures (an HTML comment: invisible in a
/// markdown viewer).
pub const FIGURES_HERE: &str = "<!-- figures -->";

/// The page: `table_md` rendered, with the figures (SVG, caption) inlined before the first
/// section.
pub fn page(
    title: &str,
    table_md: &str,
    evidence_md: &str,
    figures: &[(String, String)],
) -> String {
    let mut body = String::new();
    html::push_html(&mut body, Parser::new_ext(table_md, Options::ENABLE_TABLES));
    // The evidence last and collapsed: there for whoever checks a figure, out of the way of
    // whoever reads the answer. Its own title becomes the summary line.
    if !evidence_md.is_empty() {
        let (first, rest) = evidence_md.split_once('\n').unwrap_or((evidence_md, ""));
        let mut evidence = String::new();
        html::push_html(&mut evidence, Parser::new_ext(rest, Options::ENABLE_TABLES));
        body += &format!(
            "<details id=\"evidence\">\n<summary>{}</summary>\n{evidence}</details>\n",
            escape(first.trim_start_matches('#').trim())
        );
    }
    let mut inlined = String::new();
    for (svg, caption) in figures {
        // The SVG goes in as markup: no XML declaration inside HTML.
        let svg = svg
            .trim_start()
            .strip_prefix("<?xml")
            .and_then(|rest| rest.split_once("?>"))
            .map_or(svg.as_str(), |(_, svg)| svg);
        inlined += &format!("<figure>{svg}<figcaption>{caption}</figcaption></figure>\n");
    }
    // Where table.md marks the figures' place (after the answer and how it was made), else
    // before the first section.
    if body.contains(FIGURES_HERE) {
        body = body.replacen(FIGURES_HERE, &inlined, 1);
    } else {
        match body.find("<h2") {
            Some(i) => body.insert_str(i, &inlined),
            None => body.push_str(&inlined),
        }
    }
    // Sections can be linked (the headline links the glossary): an id from each h2's text.
    let body = with_heading_ids(&body);
    // Wide tables scroll rather than overflow the page.
    let body = body
        .replace("<table>", "<div class=\"evidence\"><table>")
        .replace("</table>", "</table></div>");
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{body}</body>\n</html>\n",
        escape(title)
    )
}

/// `<h2>What … here</h2>` → `<h2 id="what-…-here">…`: lower-case words joined by '-', the
/// anchors GitHub gives the same headings in table.md.
fn with_heading_ids(body: &str) -> String {
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    // A heading met again gets `-1`, `-2`, … as GitHub numbers them: every id unique, so
    // every in-page link reaches its own section.
    let mut seen: std::collections::BTreeMap<String, usize> = std::collections::BTreeMap::new();
    while let Some(at) = rest.find("<h2>") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 4..];
        let end = after.find("</h2>").unwrap_or(after.len());
        let text = &after[..end];
        let plain: String = strip_tags(text);
        let id: String = plain
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-')
            .collect::<String>()
            .split_whitespace()
            .collect::<Vec<_>>()
            .join("-");
        let times = seen.entry(id.clone()).or_insert(0);
        let id = match *times {
            0 => id,
            n => format!("{id}-{n}"),
        };
        *times += 1;
        out.push_str(&format!("<h2 id=\"{id}\">"));
        rest = after;
    }
    out.push_str(rest);
    out
}

fn strip_tags(s: &str) -> String {
    let mut out = String::new();
    let mut inside = false;
    for c in s.chars() {
        match c {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => out.push(c),
            _ => {}
        }
    }
    out
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_self_contained_with_the_table_and_the_chart() {
        let md = "# rxbench results\n\nIntro.\n\n## Profile `default`\n\n| conns | rx |\n| --- | --- |\n| 64 | 309k +12.6 % [+11.1, +14.3] |\n";
        let svg = "<?xml version=\"1.0\"?><svg xmlns=\"http://www.w3.org/2000/svg\"><rect/></svg>";
        let page = page(
            "rxbench <run>",
            md,
            "# Evidence: run\n\n| conns | rx |\n| --- | --- |\n| 64 | epoll/rx |\n",
            &[(svg.to_string(), CHART_CAPTION.to_string())],
        );
        // The evidence last, collapsed, its title the summary line.
        let details = page.find("<details id=\"evidence\">").unwrap();
        assert!(page.contains("<summary>Evidence: run</summary>"), "{page}");
        assert!(page.find("309k").unwrap() < details && details < page.find("epoll/rx").unwrap());
        assert!(page.starts_with("<!DOCTYPE html>"));
        assert!(page.contains("<title>rxbench &lt;run&gt;</title>"));
        assert!(page.contains("<h1>rxbench results</h1>"));
        assert!(
            page.contains("<table>") && page.contains("<td>309k +12.6 % [+11.1, +14.3]</td>"),
            "{page}"
        );
        assert!(!page.contains("<?xml"), "no XML declaration inside HTML");
        // The chart sits before the first section, after the introduction.
        let (svg_at, h2_at) = (page.find("<svg").unwrap(), page.find("<h2").unwrap());
        assert!(page.find("Intro.").unwrap() < svg_at && svg_at < h2_at);
        // Nothing is fetched: no external scripts, styles or images.
        for fetch in ["<script", "<link", "src=\"http", "<img"] {
            assert!(!page.contains(fetch), "{fetch}");
        }
    }
}

#[cfg(test)]
mod placement {
    use super::*;

    #[test]
    fn figures_go_where_the_table_marks_them_and_sections_get_ids() {
        let md = format!("# t\n\n## What it costs here\n\n- answer\n\n{FIGURES_HERE}\n\n## Profile `x`\n\ntext\n");
        let page = page("t", &md, "", &[("<svg></svg>".into(), "c".into())]);
        let (answer, svg, profile) = (
            page.find("<h2 id=\"what-it-costs-here\">").unwrap(),
            page.find("<svg").unwrap(),
            page.find("<h2 id=\"profile-x\">").unwrap(),
        );
        assert!(answer < svg && svg < profile, "{page}");
        assert!(!page.contains(FIGURES_HERE));
    }

    #[test]
    fn a_heading_met_again_gets_an_id_of_its_own() {
        let md = "# t\n\n## Profile `default`\n\nx\n\n## Profile `default`\n\ny\n\n## Profile `default`\n";
        let page = page("t", md, "", &[]);
        for id in ["profile-default", "profile-default-1", "profile-default-2"] {
            assert_eq!(
                page.matches(&format!("id=\"{id}\"")).count(),
                1,
                "{id}: {page}"
            );
        }
    }
}
