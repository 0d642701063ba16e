# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_rocm_patchkit_global_optspecs
    string join \n q/quiet knowledge= h/help V/version
end

function __fish_rocm_patchkit_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_rocm_patchkit_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_rocm_patchkit_using_subcommand
    set -l cmd (__fish_rocm_patchkit_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -l knowledge -d 'Read the knowledge files (faults.toml, knobs.toml) from this folder (or its knowledge/) instead of the ones built in: newer facts without a new binary' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -s q -l quiet -d 'Print warnings and errors only'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -s V -l version -d 'Print version'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -f -a "doctor" -d 'Which known faults affect this machine, why, and the fix to build'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -f -a "rewrite-hipblaslt" -d 'Rewrite an installed hipBLASLt\'s gfx12 kernels with expert scheduling off, in place'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -f -a "verify" -d 'Check a published folder against SHA256SUMS and its manifest, or a patched tree against its state record'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -f -a "completions" -d 'Print the shell completion script for bash, zsh or fish'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_needs_command" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l root -d 'Read the machine below this folder instead of / (a copy or a fake tree)' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l python -d 'Also look for PyTorch\'s hipBLASLt in this Python environment (a venv, conda env or site-packages folder; repeatable; taken below --root)' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l pid -d 'Judge this running program instead of what could be loaded: the hipBLASLt, HIP, comgr and rocBLAS it mapped (/proc/PID/maps), its environment (/proc/PID/environ) and its GPU nodes (below --root)' -r
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l user -d 'Judge access to /dev/kfd and the render nodes for this user of the machine (its /etc/passwd and /etc/group) instead of for you' -r
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l log -d 'Read the GPU faults of these saved logs (dmesg, journalctl -k, a job\'s stderr, an AMD_LOG_LEVEL=3 HIP log) instead of this boot\'s kernel log; repeatable (host paths, not taken below --root)' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l color -d 'Colour the text report: auto (on a terminal, unless NO_COLOR is set), always or never' -r -f -a "auto\t''
always\t''
never\t''"
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l knowledge -d 'Read the knowledge files (faults.toml, knobs.toml) from this folder (or its knowledge/) instead of the ones built in: newer facts without a new binary' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l json -d 'Print the report as JSON (keys sorted; docs/doctor-json.md)'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l report -d 'Print the report as a Markdown block to paste into a bug report: machine, kernel and module, libraries, knobs, verdicts, firmware, the GPU faults of the logs; home folders shown as ~ and your user name as <user>, no environment variable doctor does not know'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -l no-cache -d 'Read every kernel file again instead of trusting cached "off" verdicts'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -s q -l quiet -d 'Print warnings and errors only'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand doctor" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -l python -d 'The PyTorch or TheRock wheel of this Python environment (a venv, conda env or site-packages folder; repeatable), as doctor takes it' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -l threads -d 'Threads reading and rewriting kernel files [default: the CPUs]' -r
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -l knowledge -d 'Read the knowledge files (faults.toml, knobs.toml) from this folder (or its knowledge/) instead of the ones built in: newer facts without a new binary' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -l all -d 'Every hipBLASLt doctor finds that switches expert scheduling on (with --undo: every one rewritten in place)'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -l check -d 'Say what would change and change nothing'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -l undo -d 'Put back the original kernel files of a rewritten library, byte for byte; refuses, naming it, when a file changed since the rewrite'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -l force -d 'Rewrite gated kernel files too: those switch expert scheduling on only when the kernel reports KFD ABI 1.20 (the trap-handler fix in), and are left alone without it'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -s q -l quiet -d 'Print warnings and errors only'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand rewrite-hipblaslt" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand verify" -l knowledge -d 'Read the knowledge files (faults.toml, knobs.toml) from this folder (or its knowledge/) instead of the ones built in: newer facts without a new binary' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand verify" -l json -d 'Print the report as JSON'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand verify" -s q -l quiet -d 'Print warnings and errors only'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand verify" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand completions" -l knowledge -d 'Read the knowledge files (faults.toml, knobs.toml) from this folder (or its knowledge/) instead of the ones built in: newer facts without a new binary' -r -F
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand completions" -s q -l quiet -d 'Print warnings and errors only'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand completions" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand help; and not __fish_seen_subcommand_from doctor rewrite-hipblaslt verify completions help" -f -a "doctor" -d 'Which known faults affect this machine, why, and the fix to build'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand help; and not __fish_seen_subcommand_from doctor rewrite-hipblaslt verify completions help" -f -a "rewrite-hipblaslt" -d 'Rewrite an installed hipBLASLt\'s gfx12 kernels with expert scheduling off, in place'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand help; and not __fish_seen_subcommand_from doctor rewrite-hipblaslt verify completions help" -f -a "verify" -d 'Check a published folder against SHA256SUMS and its manifest, or a patched tree against its state record'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand help; and not __fish_seen_subcommand_from doctor rewrite-hipblaslt verify completions help" -f -a "completions" -d 'Print the shell completion script for bash, zsh or fish'
complete -c rocm-patchkit -n "__fish_rocm_patchkit_using_subcommand help; and not __fish_seen_subcommand_from doctor rewrite-hipblaslt verify completions help" -f -a "help" -d 'Print this message or the help of the given subcommand(s)'
