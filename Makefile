# The two set-up commands are `make run` and `make test`; both create everything they need.
VENV := .venv
PYTHON := $(VENV)/bin/python
SYSTEM_PYTHON ?= python3
STAMP := $(VENV)/.golow-installed

.PHONY: build run test monitor-alone publish-check wheel wheel-check gpu-test gpu-bundle gpu-bundle-check gpu-figures bench lint clean

# The venv holds torch 2.11.0; .venv/libtorch points at its libraries, which tch links against
# (LIBTORCH in .cargo/config.toml).
$(STAMP): requirements.txt
	$(SYSTEM_PYTHON) -m venv $(VENV)
	$(PYTHON) -m pip install --quiet --disable-pip-version-check -r requirements.txt
	ln -sfn "$$($(PYTHON) -c 'import os, torch; print(os.path.dirname(torch.__file__))')" $(VENV)/libtorch
	touch $@

build: $(STAMP)
	cargo build --release

run: build
	./target/release/golow run

test: build
	@command -v tmux >/dev/null || (apt-get update -qq && apt-get install -y -qq tmux)
	@# tests/attach.rs and tests/inject.rs: golow attach loads its step hook into running processes through gdb.
	@command -v gdb >/dev/null || (apt-get update -qq && apt-get install -y -qq gdb)
	@# tests/metrics.rs: a real Prometheus scrapes a session; promtool checks what golow serves.
	@command -v prometheus >/dev/null && command -v promtool >/dev/null \
		|| (apt-get update -qq && apt-get install -y -qq prometheus)
	cargo test --release
	@# The views drawn ratatui's own way (the one switch in src/ui/render/, read nowhere outside src/ui/, at run time
	@# so that this build serves) show the same: the UI's own tests and the snapshots again, with the switch on. The
	@# whole workspace selected, as above: `-p golow` alone unifies other features and builds golow again.
	GOLOW_PLAIN_RENDER=1 cargo test --release --workspace --lib ui::
	GOLOW_PLAIN_RENDER=1 cargo test --release --workspace --test ui_snapshots
	@# The step hook's main tests in one process and every other test class in another, at once (about 2.5 min
	@# each here): each test waits mostly on a python of its own starting and importing torch.
	cd tests/python && { $(abspath $(PYTHON)) -m unittest test_hook.HookTest & hook=$$!; \
		$(abspath $(PYTHON)) -m unittest $(PYTHON_TESTS_BESIDE_HOOK); others=$$?; \
		wait $$hook && exit $$others; }
	@# One make for the checks of what is shipped, so that the wheel both need is built once.
	$(MAKE) --no-print-directory monitor-alone gpu-bundle-check publish-check wheel-check

# Every module but the hook's, and every test class of the hook's but HookTest: whatever class is added runs.
PYTHON_TESTS_BESIDE_HOOK := $(filter-out test_hook,$(basename $(notdir $(wildcard tests/python/test_*.py)))) \
	$(addprefix test_hook.,$(filter-out HookTest,$(shell sed -n \
	's/^class \([A-Za-z]*Test\)[^A-Za-z].*/\1/p' tests/python/test_hook.py)))

# The monitor alone, as someone who only replays recordings installs it: it depends on no torch crate, and links no
# torch library and no RUNPATH to one. That it builds alone, with its own features and no libtorch to be found, is
# publish-check's: its dry run builds the golow crate as crates.io would take it.
monitor-alone: build
	@if cargo tree -p golow -e normal,build --prefix none | grep -E '^(tch|torch-sys) '; then \
		echo "golow depends on a torch crate"; exit 1; fi
	@if readelf -d target/release/golow | grep -iE 'torch|RUNPATH|RPATH'; then \
		echo "golow links torch or carries a RUNPATH"; exit 1; fi
	@echo "golow builds and links without torch"

# `cargo install golow` one step from real: the monitor and the crates it depends on package and build as crates.io
# would take them (versions on every path dependency, a licence, only the files they need).
PUBLISHED := -p golow-exec-variables -p golow-protocol -p golow-data -p golow
publish-check:
	@# The dry run serves golow's crates from a local registry, and cargo takes a registry crate's version as its
	@# content: it unpacks it once (in CARGO_HOME, under the local registry's "-<hash>" name) and builds it once (in
	@# target/debug), so an earlier run's golow-protocol 0.1.0 would be built and linked instead of today's.
	rm -rf target/package "$${CARGO_HOME:-$$HOME/.cargo}"/registry/src/-*/golow-*
	if [ -d target/debug ]; then find target/debug -name '*golow*' -prune -exec rm -rf {} +; fi
	@# Whether they build is the question, not how they debug: no debug info, which halves the linking.
	@# No libtorch to be found (torch-sys's build would fail on this LIBTORCH): the monitor needs none.
	LIBTORCH=/nonexistent/libtorch CARGO_PROFILE_DEV_DEBUG=0 cargo publish --dry-run --allow-dirty $(PUBLISHED)

# The wheel `pip install` takes (packaging/wheel.py): golow, golow-worker and golow's libraries from this build, the
# golow Python module, audited by auditwheel for this manylinux platform (glibc 2.34: the newest symbol they use).
WHEEL_PLATFORM := manylinux_2_34_x86_64
wheel: build
	$(PYTHON) packaging/wheel.py --release target/release --platform $(WHEEL_PLATFORM) --out target/wheels \
		--version "$$(cargo pkgid -p golow | sed 's/.*[#@]//')"

# The wheel installed into a fresh environment with torch 2.11 and nothing of this checkout, then used as a user
# would, from outside the checkout: doctor, a live and a headless --cmd script, --impl pytorch,libtorch.
wheel-check: wheel
	@command -v tmux >/dev/null || (apt-get update -qq && apt-get install -y -qq tmux)
	$(PYTHON) tests/wheel/check.py --python $(SYSTEM_PYTHON) target/wheels/golow-*.whl

# The #[ignore]d tests that need an NVIDIA GPU: tests/gpu.rs (sessions, with the CUPTI collector in every worker),
# bad input on a GPU machine (tests/bad_input.rs) and the worker's (the cudnn backend against aten, op by op, with
# TF32 off as those tests need).
gpu-test: build
	cargo test --release --test gpu -- --ignored --test-threads 1
	cargo test --release --test bad_input -- --ignored
	NVIDIA_TF32_OVERRIDE=0 cargo test --release -p golow-worker --lib -- --ignored --test-threads 1

# Everything a GPU machine needs and nothing else, within the 64 MiB the device carries: the binaries stripped, the
# GPU tests built, the wheel, the runner (gpu/run) as the one entry point with its scripts.
BUNDLE := gpu-bundle
BUNDLE_LIMIT := 67108864
gpu-bundle: build wheel
	@command -v patchelf >/dev/null || (apt-get update -qq && apt-get install -y -qq patchelf)
	rm -rf $(BUNDLE) && mkdir -p $(BUNDLE)
	strip -o $(BUNDLE)/golow target/release/golow
	strip -o $(BUNDLE)/golow-worker target/release/golow-worker
	@# The worker's RUNPATH names this machine's venv; there, the runner's LD_LIBRARY_PATH finds torch.
	patchelf --remove-rpath $(BUNDLE)/golow-worker
	strip --strip-unneeded -o $(BUNDLE)/libgolow_cupti.so target/release/libgolow_cupti.so
	strip --strip-unneeded -o $(BUNDLE)/libgolow_ops.so target/release/libgolow_ops.so
	strip --strip-unneeded -o $(BUNDLE)/libgolow_exec.so target/release/libgolow_exec.so
	strip -o $(BUNDLE)/gpu-tests "$$(cargo test --release --test gpu --no-run --message-format=json \
		| grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -1)"
	@# The workspace's build of the worker's tests, picked out by its target's name: `-p golow-worker` alone would
	@# unify other features and build the worker's dependencies again.
	strip -o $(BUNDLE)/gpu-worker-tests "$$(cargo test --release --workspace --lib --no-run --message-format=json \
		| grep '"name":"golow_worker"' | grep -o '"executable":"[^"]*"' | cut -d'"' -f4 | tail -1)"
	patchelf --remove-rpath $(BUNDLE)/gpu-worker-tests
	cp gpu/run gpu/figures.py $(BUNDLE)/
	@# The --cmd scripts the runner measures, and the wheel it installs as a user would.
	mkdir -p $(BUNDLE)/scripts $(BUNDLE)/wheel
	cp gpu/scripts/*.py $(BUNDLE)/scripts/
	cp target/wheels/golow-$$(cargo pkgid -p golow | sed 's/.*[#@]//')-*-$(WHEEL_PLATFORM).whl $(BUNDLE)/wheel/
	@size=$$(du -sb $(BUNDLE) | cut -f1); echo "$(BUNDLE)/: $$size bytes (the device carries $(BUNDLE_LIMIT))"; \
		if [ $$size -ge $(BUNDLE_LIMIT) ]; then echo "$(BUNDLE)/ is too large for the device"; exit 1; fi

# The bundle on this machine: every GPU binary needs libtorch_cuda (else CUDA never registers with torch's dispatcher
# and the first CUDA tensor fails), the worker carries no RUNPATH to this machine's venv, and a dry run of each plan
# writes its report with every step inside its deadline.
GPU_BINARIES := golow-worker gpu-worker-tests
gpu-bundle-check: gpu-bundle
	@for binary in $(GPU_BINARIES); do \
		readelf -d $(BUNDLE)/$$binary | grep -q 'NEEDED.*\[libtorch_cuda\.so\]' \
			|| { echo "the bundle's $$binary does not need libtorch_cuda.so"; exit 1; }; \
		! readelf -d $(BUNDLE)/$$binary | grep -qE 'RUNPATH|RPATH' \
			|| { echo "the bundle's $$binary carries a RUNPATH"; exit 1; }; \
	done
	@test "$$(ls $(BUNDLE)/wheel/*.whl | wc -l)" = 1 || { echo "the bundle must carry one wheel"; exit 1; }
	@out=$$(mktemp -d) && for plan in first second more last; do \
		$(BUNDLE)/run --dry-run --plan $$plan $$out/$$plan >/dev/null \
		&& grep -q "would run" $$out/$$plan/report.md && test -s $$out/$$plan/logs-and-summaries.tar.gz \
		&& grep -qE "^The budgets add up to [0-9]+ s of the [0-9]+ s deadline, with [0-9]+ s" $$out/$$plan/report.md \
		&& awk '/^The budgets add up to/ { if ($$6 + $$14 > $$10) { print "the " plan " plan needs " $$6 " + " $$14 " s of " $$10; exit 1 } }' \
			plan=$$plan $$out/$$plan/report.md \
		|| { echo "the dry run of the $$plan plan failed: $$out/$$plan/report.md"; exit 1; }; \
	done && rm -rf $$out && echo "$(BUNDLE)/: the GPU binaries need libtorch_cuda; each plan's dry run fits its deadline"

# The GPU figures of the README, docs/gpu.md and docs/paper.md, written again by `golow report` from the recordings each
# block names (tests/figures.rs holds them to it).
gpu-figures: build
	GOLOW_BLESS_FIGURES=1 cargo test --release --test figures

# abstraction_cost, render and tui_overhead (the last drives the TUI in tmux).
bench: build
	@command -v tmux >/dev/null || (apt-get update -qq && apt-get install -y -qq tmux)
	cargo bench

lint: $(STAMP)
	cargo fmt --check
	cargo clippy --release --all-targets -- -D warnings

clean:
	cargo clean
	rm -rf $(VENV)
