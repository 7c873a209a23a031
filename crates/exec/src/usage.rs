//! What an execution used and what it cost: the tokens its CLI reported (`observe::Usage`) and
//! the CPU time of its cgroup, priced with `[prices]` as configured when it is recorded.
//!
//! Pure: the figures come in, an `ExecutionUsage` (the payload of the `UsageRecorded` event)
//! goes out. An unknown figure stays `None` all the way to the wire, never 0: no price for the
//! model and no cost from the CLI means no inference cost; no measured CPU time or no compute
//! price means no compute cost.

use std::time::Duration;

use super::observe;
use runledger_config::Prices;
use runledger_domain::{CostSource, ExecutionUsage, InferenceCost, Tokens};

/// US dollars as nano-dollars. Inputs are bounded (prices by `config`, tokens and CLI costs by
/// `observe`), and `as` saturates, so a result never wraps.
fn nano_usd(usd: f64) -> u64 {
    (usd * 1e9).round().max(0.0) as u64
}

/// The usage of one execution: `observed` (the sum of its turns' reports, `turns == 0` when
/// the CLI reported none), `run_model` (the run's `model_id`), `cpu` (its cgroup's CPU time,
/// when measured). `None` when nothing at all is known, so nothing is recorded.
pub fn execution_usage(
    observed: &observe::Usage,
    run_model: Option<&str>,
    cpu: Option<Duration>,
    prices: &Prices,
) -> Option<ExecutionUsage> {
    let tokens = (observed.turns > 0).then_some(Tokens {
        input: observed.input_tokens,
        cached_input: observed.cached_input_tokens.min(observed.input_tokens),
        output: observed.output_tokens,
    });
    // The model the CLI says it used is what it was billed for; the run's `model_id` is what
    // was asked for (the demo agent's model means nothing to a CLI).
    let model = observed.model.clone().or_else(|| {
        run_model
            .filter(|m| !m.is_empty() && *m != "demo")
            .map(str::to_string)
    });
    let reported = observed.cost_usd.filter(|c| {
        observed.turns > 0 && c.is_finite() && *c >= 0.0 && *c <= observe::MAX_COST_USD
    });
    let inference = match (reported, tokens, &model) {
        (Some(usd), _, _) => Some(InferenceCost {
            nano_usd: nano_usd(usd),
            source: CostSource::Cli,
        }),
        (None, Some(t), Some(m)) => prices.models.get(m).map(|p| {
            let uncached = t.input - t.cached_input;
            let cached_price = p.cached_input_per_mtok.unwrap_or(p.input_per_mtok);
            let usd = (uncached as f64 * p.input_per_mtok
                + t.cached_input as f64 * cached_price
                + t.output as f64 * p.output_per_mtok)
                / 1e6;
            InferenceCost {
                nano_usd: nano_usd(usd),
                source: CostSource::Prices,
            }
        }),
        _ => None,
    };
    let cpu_ms = cpu.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let compute_nano_usd = match (cpu, prices.compute_per_cpu_hour) {
        (Some(d), Some(per_hour)) => Some(nano_usd(d.as_secs_f64() / 3600.0 * per_hour)),
        _ => None,
    };
    let usage = ExecutionUsage {
        tokens,
        model,
        inference,
        cpu_ms,
        compute_nano_usd,
    };
    let known = usage.tokens.is_some() || usage.inference.is_some() || usage.cpu_ms.is_some();
    known.then_some(usage)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runledger_config::ModelPrices;

    fn prices() -> Prices {
        Prices {
            compute_per_cpu_hour: Some(0.36),
            models: [(
                "m1".to_string(),
                ModelPrices {
                    input_per_mtok: 3.0,
                    output_per_mtok: 15.0,
                    cached_input_per_mtok: Some(0.3),
                },
            )]
            .into(),
        }
    }

    fn observed(input: u64, cached: u64, output: u64, cost: Option<f64>) -> observe::Usage {
        observe::Usage {
            turns: 1,
            input_tokens: input,
            cached_input_tokens: cached,
            output_tokens: output,
            cost_usd: cost,
            model: None,
        }
    }

    #[test]
    fn tokens_are_priced_per_model_with_the_cached_price() {
        let u = execution_usage(
            &observed(1_000_000, 200_000, 100_000, None),
            Some("m1"),
            None,
            &prices(),
        )
        .expect("known");
        // 800k × $3 + 200k × $0.30 + 100k × $15, per million.
        let cost = u.inference.expect("priced");
        assert_eq!(cost.source, CostSource::Prices);
        assert_eq!(cost.nano_usd, 2_400_000_000 + 60_000_000 + 1_500_000_000);
        assert_eq!(u.model.as_deref(), Some("m1"));
        assert_eq!(u.compute_nano_usd, None, "no CPU time measured");
    }

    #[test]
    fn without_a_cached_price_cached_tokens_cost_the_input_price() {
        let mut p = prices();
        if let Some(m) = p.models.get_mut("m1") {
            m.cached_input_per_mtok = None;
        }
        let u = execution_usage(&observed(10, 10, 0, None), Some("m1"), None, &p).expect("known");
        assert_eq!(u.inference.map(|c| c.nano_usd), Some(30_000));
    }

    #[test]
    fn the_clis_own_cost_wins_over_prices() {
        let u = execution_usage(
            &observed(1_000_000, 0, 0, Some(0.0123)),
            Some("m1"),
            None,
            &prices(),
        )
        .expect("known");
        assert_eq!(
            u.inference,
            Some(InferenceCost {
                nano_usd: 12_300_000,
                source: CostSource::Cli
            })
        );
    }

    #[test]
    fn the_model_the_cli_reported_is_priced_before_the_runs() {
        let mut o = observed(1_000_000, 0, 0, None);
        o.model = Some("m1".into());
        let u = execution_usage(&o, Some("alias"), None, &prices()).expect("known");
        assert_eq!(u.model.as_deref(), Some("m1"));
        assert_eq!(u.inference.map(|c| c.nano_usd), Some(3_000_000_000));
    }

    #[test]
    fn no_price_and_no_report_means_no_inference_cost_not_zero() {
        for model in [Some("unpriced"), None, Some("demo")] {
            let u = execution_usage(&observed(100, 0, 10, None), model, None, &prices())
                .expect("tokens are known");
            assert_eq!(u.inference, None, "{model:?}");
            assert_eq!(u.tokens.map(|t| t.input), Some(100));
        }
        let none = execution_usage(&observe::Usage::default(), Some("m1"), None, &prices());
        assert_eq!(none, None, "nothing known, nothing recorded");
    }

    #[test]
    fn cpu_time_is_priced_per_hour_when_a_price_is_set() {
        let cpu = Some(Duration::from_millis(2500));
        let u = execution_usage(&observe::Usage::default(), None, cpu, &prices()).expect("known");
        assert_eq!(u.cpu_ms, Some(2500));
        // 2.5 s of $0.36 an hour = $0.00025.
        assert_eq!(u.compute_nano_usd, Some(250_000));
        assert_eq!(u.tokens, None);
        let unpriced = execution_usage(&observe::Usage::default(), None, cpu, &Prices::default())
            .expect("known");
        assert_eq!(unpriced.cpu_ms, Some(2500));
        assert_eq!(unpriced.compute_nano_usd, None);
    }

    #[test]
    fn absurd_figures_are_bounded_or_ignored() {
        // A cost the CLI cannot have meant is not believed; the tokens are priced instead.
        for bad in [f64::NAN, f64::INFINITY, -1.0, 1e300] {
            let u = execution_usage(
                &observed(1_000_000, 0, 0, Some(bad)),
                Some("m1"),
                None,
                &prices(),
            )
            .expect("known");
            assert_eq!(
                u.inference.map(|c| c.source),
                Some(CostSource::Prices),
                "{bad}"
            );
        }
        // The largest counts observe lets through, at the highest prices config accepts, do
        // not overflow.
        let max = runledger_config::MAX_PRICE_USD;
        let p = Prices {
            compute_per_cpu_hour: Some(max),
            models: [(
                "m".to_string(),
                ModelPrices {
                    input_per_mtok: max,
                    output_per_mtok: max,
                    cached_input_per_mtok: None,
                },
            )]
            .into(),
        };
        let t = observe::MAX_TOKENS;
        let u = execution_usage(
            &observed(t, 0, t, None),
            Some("m"),
            Some(Duration::from_secs(u64::MAX / 4)),
            &p,
        )
        .expect("known");
        assert!(u.inference.is_some_and(|c| c.nano_usd < u64::MAX));
        assert_eq!(u.compute_nano_usd, Some(u64::MAX), "saturated, not wrapped");
    }
}
