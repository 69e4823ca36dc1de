//! The leadership loop: campaign; on winning, load what the previous
//! leader persisted ([`Controller::take_over`]) and only then serve; on
//! losing the lease, stop serving and campaign again; give up the term
//! when most clients cannot reach this leader.

use super::*;

/// How often a leader retries routes it could not publish.
const RETRY_EVERY: Duration = Duration::from_secs(1);

/// The election all controllers of one store namespace run.
pub const ELECTION: &str = "controller";

/// Builds a controller from its config (store, algorithm) and starts its
/// leadership loop: campaign; on winning, load what the previous leader
/// persisted ([`Controller::take_over`]) and only then serve; on losing the
/// lease, stop serving and campaign again. Followers name the leader they
/// observe in their refusals. On shutdown a leader resigns, so a follower
/// takes over at once instead of after the lease.
pub async fn start(
    cfg: &config::ControllerConfig,
    shutdown: watch::Receiver<bool>,
) -> Result<Arc<Controller>, ControlError> {
    let algo = cfg.algorithm.algorithm();
    let st = store::open(&cfg.store).await?;
    let (tx, rx) = watch::channel(None);
    let persist = Arc::new(store::StorePersist::new(st.clone()));
    let ctl = Controller::new(
        cfg.id.clone(),
        Duration::from_secs(cfg.lease_seconds),
        algo,
        persist.clone(),
        rx,
        cfg.limits.state(),
    );
    let observed = store::observe_leader(st.clone(), ELECTION, Duration::from_millis(500)).await?;
    let ttl = Duration::from_secs(cfg.store.election_ttl_seconds.max(1));
    let leading = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Followers' view of the leader, for their error messages; never
    // overrides this controller's own leadership, which only the campaign
    // below grants (after take_over).
    {
        let (tx, leading, id, mut observed, mut sd) = (
            tx.clone(),
            leading.clone(),
            cfg.id.clone(),
            observed,
            shutdown.clone(),
        );
        tokio::spawn(async move {
            loop {
                let v = observed.borrow_and_update().clone();
                if !leading.load(std::sync::atomic::Ordering::SeqCst)
                    && v.as_deref() != Some(id.as_str())
                {
                    tx.send_replace(v);
                }
                tokio::select! {
                    r = observed.changed() => if r.is_err() { return },
                    _ = sd.wait_for(|s| *s) => return,
                }
            }
        });
    }
    {
        let (c, mut sd) = (ctl.clone(), shutdown.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(RETRY_EVERY) => {}
                    _ = sd.wait_for(|s| *s) => return,
                }
                c.retry_pending().await;
            }
        });
    }
    {
        let (c, mut sd) = (ctl.clone(), shutdown.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(COMPLAINT_CHECK) => {}
                    _ = sd.wait_for(|s| *s) => return,
                }
                c.check_complaints().await;
            }
        });
    }
    let c = ctl.clone();
    let mut sd = shutdown;
    tokio::spawn(async move {
        loop {
            let guard = tokio::select! {
                g = st.campaign(ELECTION, &c.id, ttl) => g,
                _ = sd.wait_for(|s| *s) => return,
            };
            let guard = match guard {
                Ok(g) => g,
                Err(e) => {
                    tracing::warn!(id = %c.id, "campaign failed: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            };
            // Before anything is written in this term: a save that lands
            // after the term ends must not land at all.
            persist.fence(ELECTION, guard.revision());
            match c.take_over().await {
                Ok(()) => {}
                Err(e @ ControlError::StoreLayout(_)) => {
                    // Retrying cannot help: said once, in the log and the
                    // status, and this controller campaigns no more.
                    tracing::error!(id = %c.id, "not leading: {e}");
                    *c.refused.lock().unwrap_or_else(|p| p.into_inner()) = e.to_string();
                    let _ = guard.resign().await;
                    return;
                }
                Err(e) => {
                    tracing::error!(id = %c.id, "cannot load the previous leader's state, stepping down: {e}");
                    let _ = guard.resign().await;
                    tokio::time::sleep(Duration::from_millis(500)).await;
                    continue;
                }
            }
            leading.store(true, std::sync::atomic::Ordering::SeqCst);
            tx.send_replace(Some(c.id.clone()));
            tracing::info!(id = %c.id, store = %st.describe(), "leading");
            enum End {
                Lost,
                Shutdown,
                Unreachable,
            }
            let end = tokio::select! {
                _ = guard.lost() => End::Lost,
                _ = sd.wait_for(|s| *s) => End::Shutdown,
                _ = c.step_down.notified() => End::Unreachable,
            };
            leading.store(false, std::sync::atomic::Ordering::SeqCst);
            tx.send_replace(None);
            match end {
                End::Shutdown => {
                    let _ = guard.resign().await;
                    return;
                }
                End::Lost => tracing::warn!(id = %c.id, "leadership lost; campaigning again"),
                End::Unreachable => {
                    let _ = guard.resign().await;
                    let _ = c
                        .persist
                        .forget(&format!("{COMPLAINTS_KEY}{}/", c.id))
                        .await;
                    // Out of the way while a controller the clients reach
                    // takes over.
                    tokio::select! {
                        _ = tokio::time::sleep(2 * ttl) => {}
                        _ = sd.wait_for(|s| *s) => return,
                    }
                }
            }
        }
    });
    Ok(ctl)
}
