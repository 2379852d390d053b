from interp.cli import main

main(prog_name="interp")
