"""Acceptance: AMD's acceptance tools' output read into measurements, and measurements judged against AMD's criteria.

One module per tool family (``transferbench``, ``rvs``, ``babelstream``, ``blas_bench``, ``perftest``, ``amdsmi_tables``;
rccl-tests stays ``bench/rccl.py``), each with ``parse(text, source="output")`` and ``detect(text)``; ``common`` holds
the result shape and the helpers they share (line cleaning, cut markers, echoed command lines), ``prefixes`` the
launcher and log prefixes they learn and remove; ``criteria`` judges a parsed result against the criteria of a node's
hardware (``knowledge/acceptance.yml``, from the generation cards' ``acceptance`` sections).
"""
