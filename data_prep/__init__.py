"""data_prep"""
