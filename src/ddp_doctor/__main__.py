from ddp_doctor.cli import main

raise SystemExit(main())
