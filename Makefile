# make test | make demo | make bench: each creates .venv with a supported Python on first use.
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-$(shell cat setup.py | cksum | cut -d' ' -f1)

.PHONY: test demo bench install clean

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -n 2 tests   # two test processes: most tests wait on subprocesses and servers

demo: $(STAMP)
	$(PY) -m estimator_demo

bench: $(STAMP)
	$(VENV)/bin/tfpipe bench --ablation --plot runs/bench.png --json runs/bench.json   # runs/: ignored by git

$(STAMP): setup.py
	@py=""; for c in python3.11 python3.10 python3.9 python3; do \
	  if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(not (3, 9) <= sys.version_info[:2] <= (3, 11))' 2>/dev/null; then py=$$c; break; fi; \
	done; \
	if [ -z "$$py" ]; then \
	  echo "tfpipe needs Python 3.9, 3.10 or 3.11 (TensorFlow 2.15 is the last release with tf.estimator); found $$(python3 --version 2>&1). Install one of those and run make again."; \
	  exit 1; \
	fi; \
	echo "Creating $(VENV) with $$($$py --version) and installing tfpipe (first run only, a few minutes)"; \
	$$py -m venv $(VENV) && $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q -e '.[test]'
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)

clean:
	rm -rf $(VENV) *.egg-info
