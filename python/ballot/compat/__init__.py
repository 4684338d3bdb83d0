"""Adapters that give other libraries' names and signatures to Ballot's code, so that their users
switch by changing one import (:mod:`ballot.compat.byzfl`)."""
