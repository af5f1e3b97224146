"""The statistics of estimates: agreement with labels, prediction-powered inference, label-corrected estimates,
paired comparison of two versions, the regression gate, drift, sampling within a budget, calibration."""
