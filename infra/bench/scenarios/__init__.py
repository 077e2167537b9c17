"""The benchmark's scenarios, one module each, named as ``run.py --only`` names them.

Each module holds its systems and constants and exposes ``scenario(ns, svc, layer, env,
results)``, which measures and fills ``results[<name>]``, and ``report(c)`` and
``ratio_lines(c)``, which turn that entry into its tables and its ratios against the
targets. run.py runs them in its order; harness.py holds what they share.
"""
