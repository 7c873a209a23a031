//! Artifacts with the real binary and a command agent in the default sandbox: the agent reports
//! one artifact of each type through `RUNLEDGER_REPORT` while it runs and more at its end; the
//! run lists them in order, the `artifact_type` filter finds them, the artifact endpoint answers
//! each type, and the download link serves the file's bytes with safe headers. Hostile lines
//! (paths out of the workspace, a symbolic link, a directory, a FIFO, an oversized file, a fake
//! image, a non-JSON and a 10 MB line, more reports than a run may hold) are refused in the
//! transcript and never fail the run. Links expire and cannot be forged, another team sees
//! nothing, and the artifacts survive a restart and an export/import.

use crate::common;

use std::path::PathBuf;

use common::{cli, problem, script, Server};
use serde_json::{json, Value};

/// The agent: makes its files, reports one artifact of each type, waits for the test to see
/// them while it runs, then writes every hostile line and 250 pull requests, and ends with a
/// line without its newline.
const AGENT: &str = r##"set -e
R="$RUNLEDGER_REPORT"
head -c 1500000 /dev/urandom > data.bin
mkdir -p "sub dir"
cp data.bin "sub dir/données é.bin"
{ printf '\211PNG\r\n\032\n'; head -c 5000 /dev/urandom; } > shot.png
printf '<html><body><script>document.title="pwned"</script></body></html>' > page.html
echo '{"type":"pull_request","url":"https://git.example/acme/app/pull/7","branch":"fix-7","title":"Fix it"}' >> "$R"
echo '{"type":"file","path":"sub dir/données é.bin","description":"the data"}' >> "$R"
echo '{"type":"plan","title":"The plan","markdown":"# Steps\n\n1. fix\n2. test\n"}' >> "$R"
echo '{"type":"screenshot","path":"./shot.png","description":"the UI"}' >> "$R"
for i in $(seq 1 300); do [ -e release ] && break; sleep 0.1; done
ln -s /etc/passwd link
mkdir adir
mkfifo fifo
head -c 3000000 /dev/zero > big.bin
echo 'not an image' > fake.png
{
  echo '{"type":"file","path":"../../etc/passwd"}'
  echo '{"type":"file","path":"/etc/passwd"}'
  echo '{"type":"file","path":"link"}'
  echo '{"type":"file","path":"adir"}'
  echo '{"type":"file","path":"fifo"}'
  echo '{"type":"file","path":"big.bin"}'
  echo '{"type":"screenshot","path":"fake.png"}'
  echo 'this is not json'
  echo '{"type":"video","path":"x"}'
  echo '{"type":"pull_request","url":"javascript:alert(1)","branch":"b"}'
} >> "$R"
{ printf '{"type":"plan","markdown":"'; head -c 10000000 /dev/zero | tr '\0' x; echo '"}'; } >> "$R"
echo '{"type":"file","path":"page.html","description":"hostile html"}' >> "$R"
for i in $(seq 1 249); do
  echo "{\"type\":\"pull_request\",\"url\":\"https://git.example/acme/app/pull/$i\",\"branch\":\"b$i\"}"
done >> "$R"
printf '{"type":"pull_request","url":"https://git.example/last","branch":"last"}' >> "$R"
echo done
"##;

const HOSTILE: usize = 11;

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            dir: common::agent_visible_dir(),
        }
    }

    fn config(&self) -> String {
        let agent = self.dir.path().join("agent.sh");
        script(&agent, AGENT);
        let quiet = self.dir.path().join("quiet.sh");
        script(
            &quiet,
            r#"echo '{"type":"pull_request","url":"https://git.example/q/1","branch":"q"}' >> "$RUNLEDGER_REPORT""#,
        );
        format!(
            "[server]\nbind = \"127.0.0.1:0\"\nstop_grace_secs = 2\n\n\
             [limits]\nartifact_file_mb = 2\nartifact_link_secs = 4\n\n\
             [[environments]]\nid = \"reporting\"\nharness = \"command\"\ncommand = [\"{}\"]\n\n\
             [[environments]]\nid = \"quiet\"\nharness = \"command\"\ncommand = [\"{}\"]\n\n\
             [[environments]]\nid = \"silent\"\nharness = \"demo\"\ndemo_duration_ms = 10\n",
            agent.display(),
            quiet.display()
        )
    }
}

fn workspace(s: &Server, id: &str) -> PathBuf {
    s.data_dir.join("workspaces").join(id)
}

fn ids(v: &Value) -> Vec<String> {
    v["runs"]
        .as_array()
        .expect("runs")
        .iter()
        .filter_map(|r| r["run_id"].as_str().map(str::to_string))
        .collect()
}

fn uid(artifact: &Value) -> String {
    artifact["data"]["artifact_uid"]
        .as_str()
        .expect("artifact_uid")
        .to_string()
}

async fn make_key(s: &Server, name: &str, team: &str) -> String {
    let body = json!({ "name": name, "team": team });
    let (status, v) = s.post(&s.key, "/admin/keys", body).await;
    assert_eq!(status, 200, "{v}");
    v["key"].as_str().expect("key").to_string()
}

async fn download(s: &Server, url: &str) -> reqwest::Response {
    assert!(url.starts_with(&s.base), "{url}");
    s.client.get(url).send().await.expect("download")
}

#[tokio::test]
async fn an_agent_reports_artifacts_that_are_listed_filtered_served_and_kept() {
    let f = Fixture::new();
    let mut s = Server::start_with(f.dir.path(), &f.config(), &[]);
    s.wait_ready().await;
    let id = s
        .create(json!({"prompt": "report", "config": {"environment_id": "reporting"}}))
        .await;

    // The first four are picked up while the agent runs.
    let live = s
        .wait_run(&id, "four artifacts while running", |v| {
            v["artifacts"].as_array().is_some_and(|a| a.len() == 4)
        })
        .await;
    assert_eq!(live["state"], "INPROGRESS", "{live}");
    std::fs::write(workspace(&s, &id).join("release"), b"").expect("release");
    let run = s.wait_state(&id, "SUCCEEDED").await;

    let artifacts = run["artifacts"].as_array().expect("artifacts");
    assert_eq!(artifacts.len(), 200, "a run holds at most 200");
    let types: Vec<&str> = artifacts[..6]
        .iter()
        .map(|a| a["artifact_type"].as_str().expect("type"))
        .collect();
    assert_eq!(
        types,
        [
            "PULL_REQUEST",
            "FILE",
            "PLAN",
            "SCREENSHOT",
            "FILE",
            "PULL_REQUEST"
        ]
    );
    let (pr, file, plan, shot, html) = (
        &artifacts[0],
        &artifacts[1],
        &artifacts[2],
        &artifacts[3],
        &artifacts[4],
    );
    assert_eq!(
        pr["data"],
        json!({"url": "https://git.example/acme/app/pull/7", "branch": "fix-7"})
    );
    assert!(pr["created_at"].as_str().is_some_and(|t| t.ends_with('Z')));
    assert_eq!(file["data"]["filepath"], "sub dir/données é.bin");
    assert_eq!(file["data"]["filename"], "données é.bin");
    assert_eq!(file["data"]["mime_type"], "application/octet-stream");
    assert_eq!(file["data"]["size_bytes"], 1_500_000);
    assert_eq!(file["data"]["description"], "the data");
    assert_eq!(plan["data"]["title"], "The plan");
    assert_eq!(plan["data"]["document_uid"], plan["data"]["artifact_uid"]);
    assert_eq!(shot["data"]["mime_type"], "image/png");
    assert_eq!(html["data"]["mime_type"], "text/html");
    assert_eq!(
        artifacts[199]["data"]["branch"], "b195",
        "the reports past the limit are dropped, in order"
    );

    // Every hostile line is named in the transcript, and the ones past the limit too.
    let transcript = s.transcript_text(&id).await;
    let refused: Vec<&str> = transcript
        .lines()
        .filter(|l| l.starts_with("[runledger] RUNLEDGER_REPORT refused: "))
        .collect();
    assert_eq!(refused.len(), HOSTILE + 55, "{}", refused.join("\n"));
    for (line, reason) in [
        (5, "`..` leaves the workspace"),
        (6, "an absolute path outside the workspace"),
        (7, "resolves outside the workspace"),
        (8, "not a regular file"),
        (9, "not a regular file"),
        (10, "limits.artifact_file_mb"),
        (11, "is not a PNG, JPEG, GIF or WebP image"),
        (12, "not a report object"),
        (13, "unknown variant `video`"),
        (14, "only http:// and https://"),
        (15, "longer than 2097152 bytes"),
    ] {
        let prefix = format!("[runledger] RUNLEDGER_REPORT refused: report line {line}: ");
        assert!(
            refused
                .iter()
                .any(|l| l.starts_with(&prefix) && l.contains(reason)),
            "line {line} ({reason}) in:\n{}",
            refused.join("\n")
        );
    }
    assert_eq!(
        refused
            .iter()
            .filter(|l| l.contains("the run already has 200 artifacts"))
            .count(),
        55
    );
    assert!(!transcript.contains("root:x:0:0"), "no byte of /etc/passwd");

    // The filter, from the index: a second run holds a pull request only.
    let quiet = s
        .create(json!({"prompt": "q", "config": {"environment_id": "quiet"}}))
        .await;
    s.wait_state(&quiet, "SUCCEEDED").await;
    let plain = s
        .create(json!({"prompt": "nothing", "config": {"environment_id": "silent"}}))
        .await;
    for (filter, want) in [
        ("PLAN", vec![id.clone()]),
        ("FILE", vec![id.clone()]),
        ("SCREENSHOT", vec![id.clone()]),
        ("PULL_REQUEST", vec![quiet.clone(), id.clone()]),
        ("EXTERNAL_REFERENCE", vec![]),
    ] {
        let (st, v) = s
            .get(&s.key, &format!("/agent/runs?artifact_type={filter}"))
            .await;
        assert_eq!(st, 200, "{v}");
        assert_eq!(ids(&v), want, "{filter}");
    }
    let (st, v) = s
        .get(&s.key, "/agent/runs?artifact_type=PULL_REQUEST&limit=1")
        .await;
    assert_eq!((st, ids(&v)), (200, vec![quiet.clone()]));
    let cursor = v["page_info"]["next_cursor"].as_str().expect("cursor");
    let (_, v) = s
        .get(
            &s.key,
            &format!("/agent/runs?artifact_type=PULL_REQUEST&limit=1&cursor={cursor}"),
        )
        .await;
    assert_eq!(ids(&v), [id.as_str()]);
    assert_eq!(v["page_info"]["has_next_page"], false);
    let (st, v) = s.get(&s.key, "/agent/runs?artifact_type=VIDEO").await;
    assert_eq!(st, 400, "{v}");
    let detail = v["detail"].as_str().unwrap_or_default();
    assert!(
        ["PLAN", "PULL_REQUEST", "SCREENSHOT", "FILE"]
            .iter()
            .all(|t| detail.contains(t)),
        "{detail}"
    );
    let (_, v) = s.get(&s.key, &format!("/agent/runs/{plain}")).await;
    assert!(v.get("artifacts").is_none(), "omitted while empty: {v}");

    // The artifact endpoint, one shape per type.
    let (st, v) = s
        .get(&s.key, &format!("/agent/artifacts/{}", uid(plan)))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["artifact_type"], "PLAN");
    assert_eq!(v["data"]["content"], "# Steps\n\n1. fix\n2. test\n");
    assert_eq!(v["data"]["content_type"], "text/markdown");
    assert_eq!(v["data"]["notebook_uid"], uid(plan).as_str());
    assert_eq!(v["created_at"], plan["created_at"]);

    let (st, v) = s
        .get(&s.key, &format!("/agent/artifacts/{}", uid(file)))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["artifact_type"], "FILE");
    assert_eq!(v["data"]["filepath"], "sub dir/données é.bin");
    assert_eq!(v["data"]["size_bytes"], 1_500_000);
    let url = v["data"]["download_url"].as_str().expect("url").to_string();
    let r = download(&s, &url).await;
    assert_eq!(r.status(), 200);
    let headers = r.headers().clone();
    let want = std::fs::read(workspace(&s, &id).join("data.bin")).expect("data.bin");
    assert_eq!(r.bytes().await.expect("bytes").as_ref(), want.as_slice());
    assert_eq!(headers["content-length"], "1500000");
    assert_eq!(headers["content-type"], "application/octet-stream");
    assert_eq!(headers["x-content-type-options"], "nosniff");
    assert!(headers["content-security-policy"]
        .to_str()
        .is_ok_and(|c| c.starts_with("sandbox")));
    let disposition = headers["content-disposition"].to_str().expect("ascii");
    assert!(
        disposition.starts_with("attachment")
            && disposition.contains("filename*=UTF-8''donn%C3%A9es%20%C3%A9.bin"),
        "{disposition}"
    );
    let head = s.client.head(&url).send().await.expect("head");
    assert_eq!(head.status(), 200);
    assert_eq!(head.headers()["content-length"], "1500000");
    let part = s
        .client
        .get(&url)
        .header("range", "bytes=1000-1009")
        .send()
        .await
        .expect("range");
    assert_eq!(part.status(), 206);
    assert_eq!(
        part.bytes().await.expect("bytes").as_ref(),
        &want[1000..1010]
    );

    let (st, v) = s
        .get(&s.key, &format!("/agent/artifacts/{}", uid(shot)))
        .await;
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["artifact_type"], "SCREENSHOT");
    assert_eq!(v["data"]["content_type"], "image/png");
    assert_eq!(v["data"]["description"], "the UI");
    let r = download(&s, v["data"]["download_url"].as_str().expect("url")).await;
    let want = std::fs::read(workspace(&s, &id).join("shot.png")).expect("shot.png");
    assert_eq!(r.headers()["content-type"], "image/png");
    assert_eq!(r.bytes().await.expect("bytes").as_ref(), want.as_slice());

    // An HTML file never runs in the server's origin.
    let (_, v) = s
        .get(&s.key, &format!("/agent/artifacts/{}", uid(html)))
        .await;
    let html_url = v["data"]["download_url"].as_str().expect("url").to_string();
    let r = download(&s, &html_url).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-type"]
        .to_str()
        .is_ok_and(|t| t.starts_with("text/html")));
    let csp = r.headers()["content-security-policy"]
        .to_str()
        .expect("csp");
    assert!(
        csp.starts_with("sandbox") && csp.contains("default-src 'none'"),
        "{csp}"
    );
    assert!(r.headers()["content-disposition"]
        .to_str()
        .is_ok_and(|d| d.starts_with("attachment")));

    // A pull request has no artifact response; an unknown uid is a 404 too.
    let r = s
        .client
        .get(s.api("/agent/artifacts/00000000-0000-4000-8000-000000000000"))
        .bearer_auth(&s.key)
        .send()
        .await
        .expect("get");
    assert_eq!(problem(r).await.0, 404);
    // A pull request's uid is not in its `ArtifactItem`: the run's events carry it.
    let events = s.events(&id).await;
    let pr_uid = events
        .iter()
        .find(|e| e["type"] == "ArtifactReported")
        .and_then(|e| e["data"]["artifact_uid"].as_str().map(str::to_string))
        .expect("the first artifact's event");
    {
        let r = s
            .client
            .get(s.api(&format!("/agent/artifacts/{pr_uid}")))
            .bearer_auth(&s.key)
            .send()
            .await
            .expect("get");
        let (st, v) = problem(r).await;
        assert_eq!(st, 404);
        assert!(v["detail"]
            .as_str()
            .is_some_and(|d| d.contains("pull request")));
    }

    // Forged links do not exist; another team's key sees nothing.
    let forged = url.replace("token=", "token=0");
    assert_eq!(problem(download(&s, &forged).await).await.0, 404);
    let later = url.replace("expires=", "expires=9");
    assert_eq!(problem(download(&s, &later).await).await.0, 404);
    let (st, _) = s
        .post(&s.key, "/admin/teams", json!({ "name": "infra" }))
        .await;
    assert_eq!(st, 201);
    let other = make_key(&s, "bob", "infra").await;
    let (st, v) = s
        .get(&other, &format!("/agent/artifacts/{}", uid(file)))
        .await;
    assert_eq!(st, 404, "{v}");
    let (st, v) = s.get(&other, "/agent/runs?artifact_type=FILE").await;
    assert_eq!((st, ids(&v)), (200, vec![]));

    // The link expires (`artifact_link_secs = 4`).
    tokio::time::sleep(std::time::Duration::from_secs(5)).await;
    let (st, body) = problem(download(&s, &url).await).await;
    assert_eq!(st, 403, "{body}");

    // A restart keeps everything.
    let key = s.key.clone();
    s.kill();
    let mut s = Server::start_with(f.dir.path(), &f.config(), &[]);
    s.key = key.clone();
    s.wait_ready().await;
    let again = s.run(&id).await;
    assert_eq!(again["artifacts"], run["artifacts"]);
    let (_, v) = s.get(&key, "/agent/runs?artifact_type=PLAN").await;
    assert_eq!(ids(&v), [id.as_str()]);
    let (st, v) = s
        .get(&key, &format!("/agent/artifacts/{}", uid(file)))
        .await;
    assert_eq!(st, 200, "{v}");
    let r = download(&s, v["data"]["download_url"].as_str().expect("url")).await;
    let want = std::fs::read(workspace(&s, &id).join("data.bin")).expect("data.bin");
    assert_eq!(r.bytes().await.expect("bytes").as_ref(), want.as_slice());
    s.kill();

    // An export and an import keep the artifacts on the runs, and their bytes.
    let backup = f.dir.path().join("backup.jsonl");
    let data = s.data_dir.display().to_string();
    let (ok, _, err) = cli(
        &[
            "export",
            "--with-keys",
            "--output",
            &backup.display().to_string(),
            "--data-dir",
            &data,
        ],
        &[],
    );
    assert!(ok, "{err}");
    let restored = tempfile::tempdir().expect("tempdir");
    let (ok, _, err) = cli(
        &[
            "import",
            &backup.display().to_string(),
            "--data-dir",
            &restored.path().join("data").display().to_string(),
        ],
        &[],
    );
    assert!(ok, "{err}");
    let mut s = Server::start_in(restored.path(), &f.config());
    s.key = key.clone();
    s.wait_ready().await;
    let imported = s.run(&id).await;
    assert_eq!(imported["artifacts"], run["artifacts"]);
    let (_, v) = s.get(&key, "/agent/runs?artifact_type=SCREENSHOT").await;
    assert_eq!(ids(&v), [id.as_str()]);
    let (st, v) = s
        .get(&key, &format!("/agent/artifacts/{}", uid(shot)))
        .await;
    assert_eq!(st, 200, "{v}");
    let (st, v) = s
        .get(&key, &format!("/agent/artifacts/{}", uid(file)))
        .await;
    assert_eq!(st, 200, "{v}");
    let r = download(&s, v["data"]["download_url"].as_str().expect("url")).await;
    assert_eq!(r.bytes().await.expect("bytes").as_ref(), want.as_slice());
    s.kill();
}

/// An agent that overwrites its report file instead of appending: the server notes it, reads
/// the file again from its start, and the run still succeeds.
#[tokio::test]
async fn a_truncated_report_file_is_read_again_from_its_start() {
    let f = Fixture::new();
    let agent = f.dir.path().join("truncating.sh");
    script(
        &agent,
        r#"echo '{"type":"pull_request","url":"https://x.example/1","branch":"a"}' >> "$RUNLEDGER_REPORT"
sleep 1.5
echo '{"type":"pull_request","url":"https://x.ex/2","branch":"b"}' > "$RUNLEDGER_REPORT"
sleep 1.5
echo '{"type":"pull_request","url":"https://x.example/3","branch":"c"}' >> "$RUNLEDGER_REPORT"
"#,
    );
    let config = format!(
        "[server]\nbind = \"127.0.0.1:0\"\n\n[[environments]]\nid = \"t\"\nharness = \"command\"\ncommand = [\"{}\"]\n",
        agent.display()
    );
    let s = Server::start_with(f.dir.path(), &config, &[]);
    s.wait_ready().await;
    let id = s.create(json!({"prompt": "x"})).await;
    let run = s.wait_state(&id, "SUCCEEDED").await;
    let branches: Vec<&str> = run["artifacts"]
        .as_array()
        .expect("artifacts")
        .iter()
        .filter_map(|a| a["data"]["branch"].as_str())
        .collect();
    assert_eq!(branches, ["a", "b", "c"]);
    let transcript = s.transcript_text(&id).await;
    assert!(
        transcript.contains("the report file was truncated"),
        "{transcript}"
    );
}
