//! `[prices]`: what inference and compute cost, in US dollars, each price checked to lie from
//! zero to `MAX_PRICE_USD`. Turning recorded usage into a cost is `exec::usage`'s.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::file::PricesFile;
use crate::range::Range;

/// The highest price accepted, in US dollars per million tokens or per CPU hour: far above any
/// real one, low enough that no token count a CLI may report overflows a cost.
pub const MAX_PRICE_USD: f64 = 1_000.0;

/// What usage costs (`[prices]`), in US dollars. Costs are computed with the prices in force
/// when an execution's usage is recorded, and stored with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prices {
    /// Per hour of CPU time of an execution's process tree; `None`: no `compute_cost`.
    pub compute_per_cpu_hour: Option<f64>,
    /// By model id, as the CLI reports it (or as the run's `model_id` names it).
    pub models: BTreeMap<String, ModelPrices>,
}

/// The token prices of one model, per million tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ModelPrices {
    pub input_per_mtok: f64,
    pub output_per_mtok: f64,
    /// For prompt tokens read from the provider's cache; `None`: the input price.
    pub cached_input_per_mtok: Option<f64>,
}

/// `[prices]`, each price checked, naming its field (`prices.models."<id>".input_per_mtok`).
pub(crate) fn prices(file: PricesFile) -> Result<Prices, Error> {
    let price = Range::between(0.0, MAX_PRICE_USD, "a price", "US dollars");
    let check = |field: String, value: f64| price.check(&field, value);
    let compute_per_cpu_hour = file
        .compute_per_cpu_hour
        .map(|v| check("prices.compute_per_cpu_hour".into(), v))
        .transpose()?;
    let mut models = BTreeMap::new();
    for (id, m) in file.models {
        let field = |name: &str| format!("prices.models.{id:?}.{name}");
        if id.trim().is_empty() {
            return Err(Error::Invalid(format!(
                "prices.models: a model id must not be empty ({id:?})"
            )));
        }
        let prices = ModelPrices {
            input_per_mtok: check(field("input_per_mtok"), m.input_per_mtok)?,
            output_per_mtok: check(field("output_per_mtok"), m.output_per_mtok)?,
            cached_input_per_mtok: m
                .cached_input_per_mtok
                .map(|v| check(field("cached_input_per_mtok"), v))
                .transpose()?,
        };
        models.insert(id, prices);
    }
    Ok(Prices {
        compute_per_cpu_hour,
        models,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::{load_text, Config, Overrides};

    #[test]
    fn prices_are_read_and_bad_ones_name_the_line_and_field() {
        let config = load_text(
            "[prices]\ncompute_per_cpu_hour = 0.05\n\n[prices.models.\"gpt-5.5\"]\n\
             input_per_mtok = 1.25\noutput_per_mtok = 10\ncached_input_per_mtok = 0.125\n",
        )
        .expect("valid");
        assert_eq!(config.prices.compute_per_cpu_hour, Some(0.05));
        assert_eq!(
            config.prices.models["gpt-5.5"],
            ModelPrices {
                input_per_mtok: 1.25,
                output_per_mtok: 10.0,
                cached_input_per_mtok: Some(0.125),
            }
        );
        assert_eq!(load_text("").expect("valid").prices, Prices::default());
        for (text, wanted) in [
            (
                "[prices]\ncompute_per_cpu_hour = -1\n",
                "line 2: prices.compute_per_cpu_hour: -1 is not a price",
            ),
            (
                "[prices]\ncompute_per_cpu_hour = nan\n",
                "line 2: prices.compute_per_cpu_hour: NaN is not a price",
            ),
            (
                "[prices.models.\"m.1\"]\ninput_per_mtok = 1\noutput_per_mtok = 1e9\n",
                "line 3: prices.models.\"m.1\".output_per_mtok: 1000000000 is not a price",
            ),
            ("[prices.models.m]\ninput_per_mtok = 1\n", "line 1"),
            ("[prices]\ncompute_per_hour = 1\n", "line 2"),
            ("[prices.models.m]\ninput_per_mtok = \"1\"\n", "line 2"),
        ] {
            let dir = tempfile::tempdir().expect("tempdir");
            let path = dir.path().join("prices.toml");
            std::fs::write(&path, text).expect("write");
            let err = Config::load(Some(&path), &Overrides::default())
                .expect_err(text)
                .to_string();
            assert!(
                err.contains("prices.toml") && err.contains(wanted),
                "{text}: {err}"
            );
        }
    }
}
