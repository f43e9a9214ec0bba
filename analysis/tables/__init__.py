"""Run tables in and out: a CSV or a study's MLflow runs read into one normalised table, the
study spec's few keys the analysis reads, the `Judgement` every function that decides or
reports takes whole (``judgement``; built by ``analysis.judgement``), and the finished analysis
logged back to MLflow.

The bottom room of ``analysis``: it imports only ``foundation``.
"""
