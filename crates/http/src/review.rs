//! A page of steps as HTML, the part of the session page and of the console's run page that
//! reads like a review: the agent's messages, each tool call with its exit status and its
//! output folded in a `<details>`, denials, errors, usage, follow-ups where they were
//! delivered, a command agent's output. No script and no inline style: it works under both
//! pages' Content-Security-Policy, and the classes it uses are styled by each page
//! (`STYLE` in `session.rs`, `console.css`).

use super::html::escape;
use super::wire::format_time;
use runledger_runs::steps::{Kind, Page, Step, ToolStatus};

/// Output groups of more lines than this are folded.
const FOLD_LINES: u32 = 12;

/// The steps of `page` as an ordered list, then the link to the next page (`next_href`,
/// already a URL; `None` when there is no next page). `first`: the page starts at the
/// beginning (else it says the earlier steps are on earlier pages).
pub(crate) fn steps_html(page: &Page, first: bool, next_href: Option<&str>) -> String {
    let mut html = String::new();
    if !first {
        html.push_str("<p class=\"hint\">Earlier steps are on the pages before.</p>");
    }
    if page.steps.is_empty() {
        html.push_str("<p class=\"hint\">No steps yet.</p>");
    }
    html.push_str("<ol class=\"steps\">");
    for step in &page.steps {
        html.push_str(&step_html(step));
    }
    html.push_str("</ol>");
    if let Some(href) = next_href {
        html.push_str(&format!(
            "<p><a class=\"next-steps\" href=\"{}\">Next steps</a></p>",
            escape(href)
        ));
    }
    html
}

/// One step as a list item.
fn step_html(step: &Step) -> String {
    let when = format!(
        "<span class=\"when\" title=\"execution {}\">{}</span> ",
        step.execution,
        escape(&format_time(step.at))
    );
    let body = match &step.kind {
        Kind::Message { text } => format!(
            "{when}<span class=\"who\">agent</span><div class=\"said\">{}</div>",
            escape(text)
        ),
        Kind::Tool {
            name,
            target,
            status,
            exit_code,
            output,
            output_truncated,
            duration_ms,
        } => {
            let target = target
                .as_deref()
                .map(|t| format!(" <code class=\"target\">{}</code>", escape(t)))
                .unwrap_or_default();
            let end = match (exit_code, status) {
                (Some(code), _) => format!(
                    "<span class=\"exit {}\">exit {code}</span>",
                    if *code == 0 { "ok" } else { "failed" }
                ),
                (None, ToolStatus::Ok) => "<span class=\"exit ok\">ok</span>".into(),
                (None, ToolStatus::Error) => "<span class=\"exit failed\">error</span>".into(),
                (None, ToolStatus::NoResult) => "<span class=\"exit none\">no result</span>".into(),
            };
            let took = duration_ms
                .map(|ms| format!(" <span class=\"hint\">{ms} ms</span>"))
                .unwrap_or_default();
            let cut = if *output_truncated {
                "<p class=\"hint\">Output cut; the whole of it is in the raw transcript.</p>"
            } else {
                ""
            };
            let output = if output.is_empty() {
                "<p class=\"hint\">No output.</p>".to_string()
            } else {
                format!("<pre class=\"output\">{}</pre>", escape(output))
            };
            format!(
                "{when}<details class=\"tool\"><summary><span class=\"tool-name\">{}</span>\
                 {target} {end}{took}</summary>{output}{cut}</details>",
                escape(name)
            )
        }
        Kind::Denial { tool, target } => format!(
            "{when}<span class=\"denied\">denied</span> {}{}",
            escape(tool),
            target
                .as_deref()
                .map(|t| format!(" <code class=\"target\">{}</code>", escape(t)))
                .unwrap_or_default()
        ),
        Kind::Usage {
            input_tokens,
            cached_input_tokens,
            output_tokens,
            cost_usd,
            model,
        } => {
            let n = |v: &Option<u64>| v.map_or("?".to_string(), |v| v.to_string());
            let mut text = format!(
                "turn used {} input tokens ({} cached), {} output tokens",
                n(input_tokens),
                n(cached_input_tokens),
                n(output_tokens)
            );
            if let Some(cost) = cost_usd {
                text.push_str(&format!(", ${cost:.4}"));
            }
            if let Some(model) = model {
                text.push_str(&format!(", {model}"));
            }
            format!("{when}<span class=\"hint\">{}</span>", escape(&text))
        }
        Kind::Error { text } => format!(
            "{when}<span class=\"denied\">error</span> <span class=\"said\">{}</span>",
            escape(text)
        ),
        Kind::Followup { mode, text } => format!(
            "{when}<span class=\"who\">follow-up{}</span><div class=\"said\">{}</div>",
            mode.as_deref()
                .map(|m| format!(" ({})", escape(m)))
                .unwrap_or_default(),
            escape(text)
        ),
        Kind::Output {
            stream,
            text,
            lines,
            truncated,
        } => {
            let cut = if *truncated { "…" } else { "" };
            let pre = format!(
                "<pre class=\"{}\">{}{cut}</pre>",
                escape(stream),
                escape(text)
            );
            if *lines > FOLD_LINES {
                let first = text.lines().next().unwrap_or_default();
                format!(
                    "{when}<details class=\"lines\"><summary>{} lines of {}: <code>{}</code>\
                     </summary>{pre}</details>",
                    lines,
                    escape(stream),
                    escape(first)
                )
            } else {
                format!("{when}{pre}")
            }
        }
    };
    format!(
        "<li class=\"step step-{}\" id=\"step-{}\">{body}</li>",
        step.kind.name(),
        escape(&step.cursor.to_string().replace('.', "-"))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_domain::Timestamp;
    use runledger_runs::steps::Cursor;

    fn step(kind: Kind) -> Step {
        Step {
            cursor: Cursor { offset: 7, skip: 1 },
            execution: 1,
            at: Timestamp(0),
            kind,
        }
    }

    #[test]
    fn a_command_shows_its_exit_status_with_its_output_folded_and_escaped() {
        let html = step_html(&step(Kind::Tool {
            name: "Bash".into(),
            target: Some("rm -rf <dir>".into()),
            status: ToolStatus::Error,
            exit_code: Some(2),
            output: "<script>x</script>".into(),
            output_truncated: true,
            duration_ms: Some(40),
        }));
        assert!(html.contains("id=\"step-7-1\""), "{html}");
        assert!(html.contains("<details class=\"tool\"><summary>"), "{html}");
        assert!(
            html.contains("<code class=\"target\">rm -rf &lt;dir&gt;</code>"),
            "{html}"
        );
        assert!(
            html.contains("<span class=\"exit failed\">exit 2</span>"),
            "{html}"
        );
        assert!(html.contains("&lt;script&gt;x&lt;/script&gt;"), "{html}");
        assert!(!html.contains("<script>"), "{html}");
        assert!(
            html.contains("40 ms") && html.contains("Output cut"),
            "{html}"
        );
    }

    #[test]
    fn long_output_groups_fold_and_short_ones_do_not() {
        let output = |lines: u32| {
            step_html(&step(Kind::Output {
                stream: "stdout".into(),
                text: (0..lines)
                    .map(|i| format!("l{i}"))
                    .collect::<Vec<_>>()
                    .join("\n"),
                lines,
                truncated: false,
            }))
        };
        assert!(!output(3).contains("<details"));
        assert!(output(40).contains("<summary>40 lines of stdout: <code>l0</code>"));
    }
}
