"""What a trained model costs to serve: prefill and KV-cache decode, measured (`inference`) for
a study after its runs (`inference_study`) and by the pilot."""
