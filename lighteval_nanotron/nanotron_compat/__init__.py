"""Adaptations of Nanotron (0.4 and GitHub main) that apply on every device, GPU and CPU alike:
`numpy2` (checkpoint shapes under numpy 2). See docs/cpu.md.
"""
