"""`python -m estimator_demo`: see estimator_demo/train.py."""

from estimator_demo.train import run

if __name__ == "__main__":
    run()
