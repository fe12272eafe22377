from pkbsim.cli import main

main()
