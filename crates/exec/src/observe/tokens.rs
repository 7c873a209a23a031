//! The tokens and cost a CLI reported (`Usage`), for one turn or added up for an execution,
//! and the bounds a reported figure must keep to be believed. Pure arithmetic on what the
//! observer read; it prices nothing (`usage.rs` does, with `[prices]`).

/// The most tokens one usage report may claim; a larger count (or a negative, fractional or
/// non-numeric one) is not believed, and the report is ignored rather than poisoning sums.
pub const MAX_TOKENS: u64 = 1_000_000_000_000;
/// The largest cost one CLI report may claim, in US dollars; a larger, negative or non-finite
/// one is ignored (the tokens are priced instead, where a price is configured).
pub const MAX_COST_USD: f64 = 100_000.0;

/// Tokens and cost the CLI reported, for one turn or (added up) for a whole execution.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Usage {
    /// Turns whose usage report was believed; the figures below are their sums.
    pub turns: u32,
    /// Every prompt token, cached ones included.
    pub input_tokens: u64,
    /// The part of `input_tokens` read from the provider's prompt cache.
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    /// The CLI's own cost figure (Claude Code's `total_cost_usd`), when every turn gave one.
    pub cost_usd: Option<f64>,
    /// The model the CLI said it used (Claude Code's and Gemini CLI's `init` lines).
    pub model: Option<String>,
}

impl Usage {
    /// Adds a later turn's usage.
    pub fn absorb(&mut self, turn: &Usage) {
        if turn.turns == 0 {
            self.model = self.model.take().or_else(|| turn.model.clone());
            return;
        }
        self.cost_usd = match (self.turns, self.cost_usd, turn.cost_usd) {
            (0, _, cost) => cost,
            (_, Some(a), Some(b)) => Some(a + b),
            // A turn without the CLI's figure: the execution's cost is priced from tokens.
            _ => None,
        };
        self.turns += turn.turns;
        self.input_tokens = self.input_tokens.saturating_add(turn.input_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(turn.cached_input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(turn.output_tokens);
        self.model = self.model.take().or_else(|| turn.model.clone());
    }
}

/// A token count field of a usage report: 0 when absent, `Err` when present but not a count
/// to believe.
pub(super) fn count(v: &serde_json::Value) -> Result<u64, ()> {
    if v.is_null() {
        return Ok(0);
    }
    v.as_u64().filter(|n| *n <= MAX_TOKENS).ok_or(())
}

/// A cost the CLI reported, if it is one to believe.
pub(super) fn cost(v: &serde_json::Value) -> Option<f64> {
    v.as_f64()
        .filter(|c| c.is_finite() && (0.0..=MAX_COST_USD).contains(c))
}
