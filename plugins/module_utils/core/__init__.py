"""The foundations every subsystem uses: the error base, the command runner, the one file writer, sysroot access, cpulists, run lock."""
