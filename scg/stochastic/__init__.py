"""Stochastic computation graphs: sites, per-sample values, traces, surrogates, expectations."""
