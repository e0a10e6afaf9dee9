"""What the plugin says and the command lines: the prefix and warnings at the user's line (``messages``),
verbose output (``verbose_output``), decisions in a user's words (``decision_words``), the CPU GEMM message
(``cpu_gemm``), the exit line (``exit_summary``), and the ``ah-plugin`` command (``console``,
``command_line``)."""
