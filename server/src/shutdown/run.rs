//! The shutdown's steps on the server (see the module above).

use std::time::{Duration, Instant};

use ferrokv::command::catalog::ServerVersion;
use ferrokv::Reply;

use super::{ShutdownMode, ShutdownRequest, ShutdownStep, ShutdownWait, SHUTDOWN_FAILED};
use crate::blocking::Op;
use crate::client::Client;
use crate::log::{log, warn};
use crate::pause::{PauseKind, PausePurpose};
use crate::server::Server;

impl Server {
    /// Redis's prepareForShutdown: wait for lagging replicas, or finish now.
    pub fn request_shutdown(&mut self, request: ShutdownRequest) -> ShutdownStep {
        if self.shutdown.is_some() {
            return ShutdownStep::Waiting;
        }
        warn("User requested shutdown...");
        let timeout: u64 = self.cfg.get("shutdown-timeout").and_then(|v| v.parse().ok()).unwrap_or(10);
        let waits = !request.now
            && timeout != 0
            && self.engine.config().version.behaves_as() >= ServerVersion::Redis70
            && !self.ready_to_shutdown();
        if !waits {
            return self.finish_shutdown(request);
        }
        let now = Instant::now();
        if !self.pause.is_on(now) {
            self.replicas.request_acks();
        }
        self.pause.start(PausePurpose::Shutdown, PauseKind::Write, None);
        self.refresh_expire_mode();
        let deadline = now.checked_add(Duration::from_secs(timeout)).unwrap_or(now);
        self.shutdown = Some(ShutdownWait { request, deadline, clients: Vec::new() });
        log("Waiting for replicas before shutting down.");
        ShutdownStep::Waiting
    }

    /// Every replica acknowledged the whole stream (none: ready).
    fn ready_to_shutdown(&self) -> bool {
        self.replicas.acked(self.repl_offset()) == self.replicas.count()
    }

    /// From the timer: a scheduled signal's shutdown starts; a waiting one finishes once
    /// the replicas caught up or the time is up. True when the loop should end.
    pub fn shutdown_cron(&mut self) -> bool {
        if let Some(wait) = &self.shutdown {
            if Instant::now() >= wait.deadline || self.ready_to_shutdown() {
                let request = wait.request;
                return self.finish_shutdown(request) == ShutdownStep::Exit;
            }
            return false;
        }
        match self.signals.scheduled() {
            Some(param) => self.request_shutdown(self.signal_shutdown_request(param)) == ShutdownStep::Exit,
            None => false,
        }
    }

    /// Redis's finishShutdown: report the replicas behind, then the final steps. On
    /// failure the shutdown is cancelled.
    fn finish_shutdown(&mut self, request: ShutdownRequest) -> ShutdownStep {
        let offset = self.repl_offset();
        let lagging = self.replicas.lagging(offset);
        for r in &lagging {
            warn(&format!(
                "Lagging replica {} reported offset {} behind master, lag={}, state={}.",
                r.name, r.behind, r.lag, r.state
            ));
        }
        let count = self.replicas.count();
        if count > 0 {
            log(&format!("{} of {count} replicas are in sync when shutting down.", count - lagging.len()));
        }
        match self.prepare_shutdown(request.mode, request.force) {
            Ok(()) => {
                self.exit = true;
                ShutdownStep::Exit
            }
            Err(e) => {
                warn(&e);
                warn("Errors trying to shut down the server. Check the logs for more information.");
                self.cancel_shutdown();
                ShutdownStep::Failed
            }
        }
    }

    /// The shutdown will not happen: its clients get the error, writes resume.
    fn cancel_shutdown(&mut self) {
        self.signals.cancel();
        if let Some(wait) = self.shutdown.take() {
            for id in wait.clients {
                self.end_wait(id, Some(Reply::err(SHUTDOWN_FAILED)));
            }
            self.end_pause(PausePurpose::Shutdown);
        }
    }

    /// SHUTDOWN ABORT: false when no shutdown was waiting or scheduled.
    pub fn abort_shutdown(&mut self) -> bool {
        let waiting = self.shutdown.is_some();
        let scheduled = self.signals.scheduled().is_some();
        if !waiting && !scheduled {
            return false;
        }
        self.cancel_shutdown();
        log("Shutdown manually aborted.");
        true
    }

    /// `c` waits for the shutdown under way (its SHUTDOWN answered only if it fails).
    pub fn wait_for_shutdown(&mut self, c: &mut Client) {
        if let Some(wait) = self.shutdown.as_mut() {
            wait.clients.push(c.id);
            self.park(c, Op::Shutdown, Vec::new(), None);
        }
    }

    /// INFO's shutdown_in_milliseconds, while a shutdown waits.
    pub fn shutdown_in_ms(&self) -> Option<u64> {
        self.shutdown.as_ref().map(|w| w.deadline.saturating_duration_since(Instant::now()).as_millis() as u64)
    }

    /// How a signal shuts down: its `shutdown-on-sigterm` / `shutdown-on-sigint` flags.
    fn signal_shutdown_request(&self, param: &str) -> ShutdownRequest {
        let flags = self.cfg.get(param).unwrap_or_default();
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        let mode = if has("nosave") {
            ShutdownMode::NoSave
        } else if has("save") {
            ShutdownMode::Save
        } else {
            ShutdownMode::Default
        };
        ShutdownRequest { mode, force: has("force"), now: has("now") }
    }
}
