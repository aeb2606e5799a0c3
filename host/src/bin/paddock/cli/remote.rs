//! `--server URL --token TOKEN` (or `PADDOCK_SERVER` / `PADDOCK_TOKEN`):
//! the same commands against a remote `paddock serve --api`, printed by the
//! same functions from the same structs, so the output is the local
//! output. Every command is remote but those that cannot be: `serve` and
//! `demo` (they run a node, on a database of their own), `trigger run
//! --wait` (it runs triggers in this process).
//! Files named on the command line (`component push`, `job apply`, `group
//! apply`, `connector secret set --from-file`) are read here and uploaded.
//! [`admin`] has the admin commands, [`ops`] the operations ones.

mod admin;
mod ops;

use super::{Command, ComponentCmd, JobCmd, TriggerCmd, gates, print};
use anyhow::{Context, anyhow, bail};
use paddock::api::views::{TriggerRow, TriggerView};
use paddock::api::wire::{
    ApplyRequest, ApplyResponse, ApproveRequest, CancelRequest, Done, JobView, Page, PushResponse,
    RunRequest, RunResponse,
};
use paddock::model::gates::GateScope;
use paddock::store::{ComponentRecord, JobRecord};
use serde::de::DeserializeOwned;
use std::path::Path;
use std::process::ExitCode;

/// A client of one server with one token.
struct Client {
    http: reqwest::Client,
    base: String,
    token: String,
}

impl Client {
    fn new(server: &str, token: Option<&str>) -> anyhow::Result<Self> {
        let Some(token) = token.filter(|t| !t.trim().is_empty()) else {
            bail!(
                "--server needs --token (or PADDOCK_TOKEN): create one with `paddock token create`"
            );
        };
        Ok(Self {
            http: reqwest::Client::new(),
            base: server.trim_end_matches('/').to_string(),
            token: token.trim().to_string(),
        })
    }

    fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(format!("{}{path}", self.base))
    }

    fn post(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.post(format!("{}{path}", self.base))
    }

    fn put(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.put(format!("{}{path}", self.base))
    }

    fn delete(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.delete(format!("{}{path}", self.base))
    }

    /// Close, reopen or cancel `scope` (`verb`): each scope has its route,
    /// as each has the role that may use it.
    async fn gate<T: DeserializeOwned>(
        &self,
        scope: &GateScope,
        verb: &str,
        reason: &str,
    ) -> anyhow::Result<T> {
        let path = match scope {
            GateScope::Job(job) => format!("/v1/jobs/{}/{verb}", admin::segment(job)),
            GateScope::Global => format!("/v1/gates/global/{verb}"),
            other => format!("/v1/gates/{}/{}/{verb}", other.kind(), other.value()),
        };
        self.send(
            self.post(&path)
                .json(&serde_json::json!({ "reason": reason })),
        )
        .await
    }

    /// Send with the token; an error answer becomes its message.
    async fn send<T: DeserializeOwned>(
        &self,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<T> {
        let (body, _) = self.fetch(request).await?;
        serde_json::from_slice(&body).with_context(|| format!("an answer of {}", self.base))
    }

    /// Send with the token: the answer's body and headers (an error answer
    /// becomes its message).
    async fn fetch(
        &self,
        request: reqwest::RequestBuilder,
    ) -> anyhow::Result<(Vec<u8>, reqwest::header::HeaderMap)> {
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(|e| anyhow!("cannot reach {}: {}", self.base, causes(&e)))?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response
            .bytes()
            .await
            .map_err(|e| anyhow!("reading the answer of {}: {}", self.base, causes(&e)))?;
        if !status.is_success() {
            let error: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let message = error["error"]["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| String::from_utf8_lossy(&body).into_owned());
            bail!("{message} (HTTP {})", status.as_u16());
        }
        Ok((body.to_vec(), headers))
    }

    /// Every item of a list, page by page, up to `most`.
    async fn all<T: DeserializeOwned>(&self, path: &str, most: usize) -> anyhow::Result<Vec<T>> {
        let mut items = Vec::new();
        let mut after: Option<String> = None;
        while items.len() < most {
            let want = (most - items.len()).min(500);
            let mut request = self.get(path).query(&[("limit", want.to_string())]);
            if let Some(a) = &after {
                request = request.query(&[("after", a)]);
            }
            let page: Page<T> = self.send(request).await?;
            items.extend(page.items);
            match page.next {
                Some(next) => after = Some(next),
                None => break,
            }
        }
        Ok(items)
    }
}

/// An error and its causes, each once.
fn causes(error: &dyn std::error::Error) -> String {
    let mut parts = vec![error.to_string()];
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = cause.source();
    }
    parts.join(": ")
}

/// Run `command` against the server.
pub async fn run(server: &str, token: Option<&str>, command: Command) -> anyhow::Result<ExitCode> {
    let client = Client::new(server, token)?;
    match command {
        Command::Trigger(cmd) => trigger(&client, cmd).await?,
        Command::Job(cmd) => job(&client, cmd).await?,
        Command::Component(ComponentCmd::Diff { a, b }) => {
            ops::component_diff(&client, &a, &b).await?
        }
        Command::Component(cmd) => component(&client, cmd).await?,
        Command::Effects(cmd) => ops::effects(&client, cmd).await?,
        Command::Exceptions(cmd) => ops::exceptions(&client, cmd).await?,
        Command::Audit(cmd) => return ops::audit(&client, cmd).await,
        Command::Report(cmd) => return ops::report(&client, cmd).await,
        Command::Status(args) => ops::status(&client, args).await?,
        Command::Schedule(cmd) => ops::schedule(&client, cmd).await?,
        Command::Token(cmd) => admin::token(&client, cmd).await?,
        Command::Group(cmd) => admin::group(&client, cmd).await?,
        Command::Tenant(cmd) => admin::tenant(&client, cmd).await?,
        Command::Connector(cmd) => admin::connector(&client, cmd).await?,
        Command::Price(cmd) => admin::price(&client, cmd).await?,
        Command::Pause(args) => {
            let scope = args.scope()?;
            let r = client.gate(&scope, "pause", &args.reason).await?;
            gates::print_paused(&scope, &r);
        }
        Command::Resume(args) => {
            let scope = args.scope()?;
            let r = client.gate(&scope, "resume", &args.reason).await?;
            gates::print_resumed(&scope, &r);
        }
        Command::Cancel(args) => {
            let scope = args.scope()?;
            let r = client.gate(&scope, "cancel", &args.reason).await?;
            gates::print_cancelled(&scope, &r);
        }
        Command::Gates(args) => {
            let path = format!("/v1/gates?history={}", args.history);
            let list: Vec<paddock::store::GateRecord> = client.send(client.get(&path)).await?;
            gates::print_gates(&list);
        }
        Command::Serve(_) => {
            bail!("`serve` runs a node on its database: it does not take --server")
        }
        Command::Demo(_) => {
            bail!("`demo` runs on a fresh local database of its own: it does not take --server")
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn trigger(client: &Client, cmd: TriggerCmd) -> anyhow::Result<()> {
    match cmd {
        TriggerCmd::Run {
            job,
            params,
            wait,
            request_key,
        } => {
            if wait {
                bail!("--wait runs triggers in this process: it does not work with --server");
            }
            let request = RunRequest {
                job,
                params: params.into_iter().collect(),
                request_key,
            };
            let ran: RunResponse = client
                .send(client.post("/v1/triggers").json(&request))
                .await?;
            print::run_created(&ran.trigger, ran.created);
        }
        TriggerCmd::List { limit } => {
            let rows: Vec<TriggerRow> = client.all("/v1/triggers", limit.max(0) as usize).await?;
            print::trigger_rows(&rows);
        }
        TriggerCmd::Show { id } => {
            let view: TriggerView = client
                .send(client.get(&format!("/v1/triggers/{id}")))
                .await?;
            print::trigger_view(&view);
        }
        TriggerCmd::Approve { id, reason } => {
            let _: Done = client
                .send(
                    client
                        .post(&format!("/v1/triggers/{id}/approve"))
                        .json(&ApproveRequest { reason }),
                )
                .await?;
            println!("trigger {0} approved: pending", id);
        }
        TriggerCmd::Cancel { id, reason } => {
            let _: Done = client
                .send(
                    client
                        .post(&format!("/v1/triggers/{id}/cancel"))
                        .json(&CancelRequest { reason }),
                )
                .await?;
            println!("trigger {0}: cancel requested", id);
        }
        TriggerCmd::Retry { id, reason } => {
            let retried: paddock::store::Retried = client
                .send(
                    client
                        .post(&format!("/v1/triggers/{id}/retry"))
                        .json(&CancelRequest { reason }),
                )
                .await?;
            super::print_retried(id, &retried);
        }
    }
    Ok(())
}

async fn job(client: &Client, cmd: JobCmd) -> anyhow::Result<()> {
    match cmd {
        JobCmd::Apply { file } => {
            let manifest = remote_manifest(client, &file).await?;
            let applied: ApplyResponse = client
                .send(client.post("/v1/jobs").json(&ApplyRequest { manifest }))
                .await?;
            print::applied(&applied.job, &applied.outcome);
        }
        JobCmd::List => {
            let jobs: Vec<JobRecord> = client.all("/v1/jobs", usize::MAX).await?;
            print::jobs(&jobs);
        }
        JobCmd::Show { job } => {
            let view: JobView = client
                .send(client.get(&format!("/v1/jobs/{}", admin::segment(&job))))
                .await?;
            print::job_versions(&view.versions);
        }
    }
    Ok(())
}

/// The manifest at `file` as the server takes it: a component named by a
/// path (relative to the manifest) is pushed first and named by digest.
async fn remote_manifest(client: &Client, file: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| anyhow!("cannot read '{}': {e}", file.display()))?;
    let mut table: toml::Table =
        toml::from_str(&text).map_err(|e| anyhow!("{}: {e}", file.display()))?;
    let Some(component) = table.get("component").and_then(|c| c.as_str()) else {
        return Ok(text);
    };
    if component.starts_with("sha256:") {
        return Ok(text);
    }
    let path = file.parent().unwrap_or(Path::new(".")).join(component);
    let pushed = push(client, &path).await?;
    table.insert(
        "component".into(),
        toml::Value::String(format!("sha256:{}", pushed.digest)),
    );
    Ok(toml::to_string(&table)?)
}

async fn push(client: &Client, file: &Path) -> anyhow::Result<PushResponse> {
    let bytes =
        std::fs::read(file).map_err(|e| anyhow!("cannot read '{}': {e}", file.display()))?;
    client
        .send(
            client
                .post("/v1/components")
                .header(reqwest::header::CONTENT_TYPE, "application/wasm")
                .body(bytes),
        )
        .await
}

async fn component(client: &Client, cmd: ComponentCmd) -> anyhow::Result<()> {
    match cmd {
        ComponentCmd::Push { file } => {
            let pushed = push(client, &file).await?;
            print::pushed(pushed.created, &pushed.digest, &pushed.manifest);
        }
        ComponentCmd::List => {
            let components: Vec<ComponentRecord> = client.all("/v1/components", usize::MAX).await?;
            print::components(&components);
        }
        ComponentCmd::Inspect { digest } => {
            let digest = digest.trim_start_matches("sha256:");
            let record: ComponentRecord = client
                .send(client.get(&format!("/v1/components/{digest}")))
                .await?;
            println!(
                "component sha256:{}  ({} bytes, pushed by {})",
                record.digest, record.size_bytes, record.pushed_by
            );
            print::manifest(&serde_json::from_str(&record.manifest)?);
        }
        ComponentCmd::Diff { a, b } => ops::component_diff(client, &a, &b).await?,
    }
    Ok(())
}
