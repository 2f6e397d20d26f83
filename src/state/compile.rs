//! What compiling costs a level: the first compilation, the recompilations, whether Inductor's cache was cold or
//! warm, and after how many steps the level has paid that time back against eager PyTorch.

use golow_protocol::event::{Compile, CompileTrigger, Compiling};
use serde::{Deserialize, Serialize};

/// Whether Inductor found what it compiled in its cache.
#[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Cache {
    /// Everything was built: the first compilation with an empty cache.
    Cold,
    /// Everything was found: an earlier session compiled the same graphs into the same cache.
    Warm,
    /// Some of each.
    Partial,
}

impl Cache {
    pub fn name(self) -> &'static str {
        match self {
            Cache::Cold => "cold",
            Cache::Warm => "warm",
            Cache::Partial => "partial",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct CompileState {
    /// The first compilation of every frame, its backward graph and CUDA graph recordings included.
    pub first_ms: f64,
    /// Frames compiled again when a guard failed (a new batch size, the switch to evaluation).
    pub recompile_ms: f64,
    pub recompiles: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// The latest step a compilation fell in: that step's time is largely the compiler's.
    last_step: Option<u64>,
    /// Steps past the warm-up kept out of the statistics because a compilation fell in them.
    pub excluded_steps: u64,
    /// When the compilation under way began (seconds since the session started).
    pub compiling_since_s: Option<f64>,
    /// The model was compiled into a package before the session (`aoti`), not as it ran.
    pub ahead_of_time: bool,
}

impl CompileState {
    /// A compilation began at `t` seconds.
    pub fn begin(&mut self, t: f64, compiling: &Compiling) {
        self.compiling_since_s = Some(t);
        if let Some(step) = compiling.step {
            self.last_step = Some(step);
        }
    }

    /// Folds one report; a duration that is no duration (a misbehaving worker) is not counted.
    pub fn apply(&mut self, compile: &Compile) {
        self.compiling_since_s = None;
        if let Some(step) = compile.step {
            self.last_step = Some(step);
        }
        if !(compile.ms.is_finite() && compile.ms >= 0.0) {
            return;
        }
        self.ahead_of_time |= compile.trigger == CompileTrigger::Package;
        if compile.recompile {
            self.recompile_ms += compile.ms;
            // A recompiled frame's backward graph is part of the same recompilation.
            if compile.trigger == CompileTrigger::Dynamo {
                self.recompiles += 1;
            }
        } else {
            self.first_ms += compile.ms;
        }
        self.cache_hits += u64::from(compile.cache_hits);
        self.cache_misses += u64::from(compile.cache_misses);
    }

    /// Everything compiling cost, in milliseconds.
    pub fn total_ms(&self) -> f64 {
        self.first_ms + self.recompile_ms
    }

    /// Whether a compilation fell in step `step`, which then measures the compiler rather than the level.
    pub fn fell_in(&self, step: u64) -> bool {
        self.last_step == Some(step)
    }

    /// `None` when Inductor's caches were not consulted (nothing was compiled yet).
    pub fn cache(&self) -> Option<Cache> {
        match (self.cache_hits, self.cache_misses) {
            (0, 0) => None,
            (_, 0) => Some(Cache::Warm),
            (0, _) => Some(Cache::Cold),
            _ => Some(Cache::Partial),
        }
    }
}

/// The steps after which a level that spent `compile_ms` compiling and takes `step_ms` a step has run as long as an
/// eager one taking `eager_step_ms`: the first n with `compile_ms + n·step_ms ≤ n·eager_step_ms`. `None` when it
/// never does (it is no faster).
pub fn break_even_steps(compile_ms: f64, step_ms: f64, eager_step_ms: f64) -> Option<u64> {
    let saved = eager_step_ms - step_ms;
    if !(compile_ms.is_finite() && saved.is_finite() && saved > 0.0 && compile_ms >= 0.0) {
        return None;
    }
    let steps = (compile_ms / saved).ceil();
    (steps < u64::MAX as f64).then_some(steps as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use golow_protocol::config::Mode;

    fn compile(step: Option<u64>, trigger: CompileTrigger, recompile: bool, ms: f64) -> Compile {
        Compile {
            step,
            phase: Mode::Train,
            trigger,
            recompile,
            ms,
            cache_hits: 0,
            cache_misses: 1,
        }
    }

    #[test]
    fn first_compilations_and_recompilations_are_counted_apart() {
        let mut state = CompileState::default();
        state.apply(&compile(Some(0), CompileTrigger::Dynamo, false, 60_000.0));
        state.apply(&compile(
            Some(0),
            CompileTrigger::LazyBackward,
            false,
            25_000.0,
        ));
        state.apply(&compile(None, CompileTrigger::Dynamo, true, 800.0));
        state.apply(&compile(Some(7), CompileTrigger::Dynamo, true, 1_200.0));
        state.apply(&compile(Some(7), CompileTrigger::LazyBackward, true, 300.0));
        state.apply(&compile(Some(8), CompileTrigger::Dynamo, true, f64::NAN));
        assert_eq!(state.first_ms, 85_000.0);
        assert_eq!(state.recompile_ms, 2_300.0);
        assert_eq!(state.recompiles, 2);
        assert_eq!(state.total_ms(), 87_300.0);
        assert!(state.fell_in(8) && !state.fell_in(7));
        assert_eq!(state.cache(), Some(Cache::Cold));
    }

    #[test]
    fn the_cache_is_warm_only_when_everything_was_found() {
        let mut state = CompileState::default();
        assert_eq!(state.cache(), None);
        let mut found = compile(Some(0), CompileTrigger::Dynamo, false, 1.0);
        (found.cache_hits, found.cache_misses) = (2, 0);
        state.apply(&found);
        assert_eq!(state.cache(), Some(Cache::Warm));
        state.apply(&compile(None, CompileTrigger::Dynamo, true, 1.0));
        assert_eq!(state.cache(), Some(Cache::Partial));
    }

    #[test]
    fn a_package_made_ahead_of_time_is_compile_time_that_no_step_holds() {
        let mut state = CompileState::default();
        state.apply(&compile(None, CompileTrigger::Package, false, 27_000.0));
        assert!(state.ahead_of_time);
        assert_eq!(state.total_ms(), 27_000.0);
        assert!(!state.fell_in(0));
        let mut live = CompileState::default();
        live.apply(&compile(Some(0), CompileTrigger::Dynamo, false, 1.0));
        assert!(!live.ahead_of_time);
    }

    #[test]
    fn a_level_pays_its_compilation_back_when_it_is_faster() {
        // 10 s of compiling, 2 ms saved a step: 5,000 steps.
        assert_eq!(break_even_steps(10_000.0, 8.0, 10.0), Some(5_000));
        // A remainder needs one more step.
        assert_eq!(break_even_steps(10_001.0, 8.0, 10.0), Some(5_001));
        assert_eq!(break_even_steps(0.0, 8.0, 10.0), Some(0));
        assert_eq!(break_even_steps(10_000.0, 10.0, 10.0), None);
        assert_eq!(break_even_steps(10_000.0, 12.0, 10.0), None);
        assert_eq!(break_even_steps(f64::NAN, 8.0, 10.0), None);
        assert_eq!(break_even_steps(1e300, 8.0, 8.0 + 1e-300), None);
    }
}
