"""Tests of the tracking store and server: lost stores, races, logins, the REST reader."""
